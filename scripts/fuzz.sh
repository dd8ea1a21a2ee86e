#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Builds the libFuzzer targets with Clang into build-fuzz/ and runs each for a bounded time; non-zero on any finding.
#
# Usage: scripts/fuzz.sh [seconds per target, default 60]
# Seeds: tests/data and resources/examples (tensor files), resources/presets, resources/examples and
# tests/data/spec_*.json (specs, the hostile ones included), tests/data/tokenizers/*.json (tokenizer.json),
# tests/data/tokenizers/*.model (tokenizer.model), tests/data/tokenizers/vocab_*.txt (GGUF-style vocabularies in
# fuzz_tokenizer_vocab's line format), tests/data/gguf/*.gguf (GGUF, the hostile ones included), three argument
# lists (the option reader), copied to a temporary corpus so the repository is never modified. Targets run KVLENS_JOBS
# (default 2) at a time, one core each. Crashing inputs are kept in <fuzz dir>/artifacts/<target>/ and
# each run's log in <fuzz dir>/fuzz_<target>.log.
# The targets are built in the ASan tree (build-asan/fuzz/, preset "asan", whose kvlens_core already
# carries the coverage instrumentation), so after the sanitizer stage only the small target files compile.
# KVLENS_FUZZ_BUILD_DIR=build-fuzz builds them standalone instead (no Qt, no OpenCL needed).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build_dir=${KVLENS_FUZZ_BUILD_DIR:-build-asan}
jobs=${KVLENS_JOBS:-2}

./scripts/deps.sh clang libclang-rt-dev lld
if [ "$build_dir" = build-asan ]; then
  cmake --preset asan >/dev/null
  fuzz_dir=$build_dir/fuzz
else
  CC=clang CXX=clang++ cmake -S fuzz -B "$build_dir" -DCMAKE_BUILD_TYPE=None >/dev/null  # flags: fuzz/CMakeLists.txt (asserts on)
  fuzz_dir=$build_dir
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
built=()
for target in npy npz safetensors gguf gguf_model spec eval_spec eval_shard tokenizer_json tokenizer_model tokenizer_vocab hf_config weight_index cli; do
  # One target at a time, so a core file that this Clang cannot compile stops only the target that needs it.
  if ! cmake --build "$build_dir" -j"$jobs" --target "fuzz_$target" >"$fuzz_dir/build_$target.log" 2>&1; then
    echo "fuzz_$target: BUILD FAILED (log: $fuzz_dir/build_$target.log)" >&2
    grep -E 'error' "$fuzz_dir/build_$target.log" | head -10 >&2 || true
    status=1
  else
    built+=("$target")
  fi
done

# Runs one target for $seconds; its verdict goes to $work/<target>.verdict.
fuzz_one() {
  local target=$1 corpus="$work/$1" artifacts="$fuzz_dir/artifacts/$1" log="$fuzz_dir/fuzz_$1.log"
  mkdir -p "$corpus" "$artifacts"
  if [ "$target" = spec ]; then
    cp resources/presets/*.json resources/examples/*.json tests/data/spec_*.json "$corpus"/
  elif [ "$target" = eval_spec ]; then
    cp tests/data/eval_specs/*.json "$corpus"/
  elif [ "$target" = eval_shard ]; then
    printf 'seed' >"$corpus/empty" # the body of a shard file: the fuzzer builds it from nothing
  elif [ "$target" = gguf ] || [ "$target" = gguf_model ]; then
    cp tests/data/gguf/*.gguf "$corpus"/
  elif [ "$target" = cli ]; then
    # Seeds: argument lists, one word per NUL.
    printf '%s\0' d --out o --n 8 --meta a=1 --meta b=2 >"$corpus/values"
    printf '%s\0' --out=o --x 1e-3 --law gauss -- --quiet >"$corpus/forms"
    printf '%s\0' --out --quiet --bogus --help >"$corpus/refusals"
  elif [ "$target" = tokenizer_json ]; then
    cp tests/data/tokenizers/*.json "$corpus"/
  elif [ "$target" = tokenizer_model ]; then
    cp tests/data/tokenizers/*.model tests/data/tokenizers/hostile/*.model "$corpus"/
  elif [ "$target" = tokenizer_vocab ]; then
    cp tests/data/tokenizers/vocab_*.txt "$corpus"/
  elif [ "$target" = hf_config ] || [ "$target" = weight_index ]; then
    # Seeds: the test model folders' config.json and index files, each under a distinct name.
    for f in tests/data/models/*/*.json resources/models/*/*.json; do
      [ -f "$f" ] && cp "$f" "$corpus/$(echo "$f" | tr / _)"
    done
  else
    find tests/data resources/examples -maxdepth 1 -type f ! -name '*.md' ! -name '*.json' -exec cp {} "$corpus"/ \;
  fi
  if "$fuzz_dir/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz_$target: ${seconds}s, ${runs:-?} executions, no findings" >"$work/$target.verdict"
  else
    { echo "fuzz_$target: FINDING (log: $log, input: $artifacts/)"
      grep -E 'ERROR|SUMMARY|runtime error|deadly signal|Test unit written' "$log" | head -20 || true; } >"$work/$target.verdict"
    return 1
  fi
}

# $jobs targets at a time (one core each).
pids=()
for target in "${built[@]}"; do
  fuzz_one "$target" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
for target in "${built[@]}"; do
  cat "$work/$target.verdict"
done
exit $status
