#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# The forward on a GPU, checked whenever a machine with one is at hand: builds the app and the
# benchmark, writes a TinyLlama-shaped random model (scripts/make_large_model.py), prints the product
# rates and one chunk's tokens/s on the CPU and on the device with the agreement of their logits
# (kvlens-lm-bench --model --backend opencl), then evaluates the model on the first GPU and on the CPU
# (kvlens eval --backend opencl / cpu) and prints each run's tokens/s and, per configuration, the
# agreement of PPL, mean KLD and same-top. Without a GPU it says so and compares PoCL (the CPU OpenCL
# device) with the CPU on a smaller model. Exit status 0 when every configuration agrees (PPL and KLD
# within 1e-4 relative, KLD within 1e-7 absolute below that, same top within one token per thousand),
# 1 otherwise.
#   scripts/device_check.sh [WORK_DIR]                 (default /tmp/kvlens-device-check)
# Environment: KVLENS_CHECK_SHAPE (tinyllama, or small without a GPU), KVLENS_CHECK_CHUNKS (4),
# KVLENS_CHECK_CTX (512), KVLENS_CHECK_SCHEMES (q8_0,q4_0,KV,KIVI,TQ-KV), KVLENS_BUILD_DIR (build-device).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/kvlens-device-check}
build_dir=${KVLENS_BUILD_DIR:-build-device}
ctx=${KVLENS_CHECK_CTX:-512}
chunks=${KVLENS_CHECK_CHUNKS:-4}
schemes=${KVLENS_CHECK_SCHEMES:-q8_0,q4_0,KV,KIVI,TQ-KV}
export QT_QPA_PLATFORM=offscreen
mkdir -p "$work"

echo "== build: kvlens and kvlens-lm-bench into $build_dir ($(nproc) jobs)"
generator=()
[ -f "$build_dir/CMakeCache.txt" ] || generator=(-G Ninja)
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DKVLENS_BUILD_TESTS=OFF >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target kvlens kvlens-lm-bench
kvlens="$build_dir/app/kvlens"
bench="$build_dir/bench/kvlens-lm-bench"

echo "== OpenCL devices"
devices=$("$kvlens" --list-devices)
echo "$devices"
device=$(echo "$devices" | awk -F: '/ \(GPU, / { print $1; exit }')
if [ -n "$device" ]; then
  shape=${KVLENS_CHECK_SHAPE:-tinyllama}
  echo "== GPU: device $device; model shape $shape"
else
  device=$(echo "$devices" | awk -F: '/^[0-9]+: / { print $1; exit }')
  if [ -z "$device" ]; then
    echo "kvlens: no OpenCL device at all: nothing to check" >&2
    exit 1
  fi
  shape=${KVLENS_CHECK_SHAPE:-small}
  echo "== NO GPU here: comparing OpenCL device $device (PoCL, the CPU's OpenCL) with the CPU on the $shape shape"
fi

model="$work/$shape-bf16"
tokens=$(( (chunks + 1) * ctx ))
if [ ! -f "$model/model.safetensors" ]; then
  echo "== model: $model"
  /usr/bin/python3 scripts/make_large_model.py --shape "$shape" --dtype bf16 --tokens "$tokens" --out "$model"
fi

echo "== kvlens-lm-bench --model (product rates, one forward of $ctx tokens on the CPU and on the device)"
"$bench" --model "$model" --ctx "$ctx" --backend opencl --device "$device"

run_eval() { # backend out [--device D]
  local backend=$1 out=$2
  shift 2
  rm -rf "$out"
  "$kvlens" eval --model "$model" --tokens "$model/tokens.npy" --schemes "$schemes" --budgets 3 --ctx "$ctx" \
    --chunks "$chunks" --calibration 0 --attribution none --no-figures --quiet --backend "$backend" "$@" --out "$out" \
    >"$out.log" 2>&1 || { cat "$out.log"; return 1; }
  grep -E "^forward: |tokens/s" "$out/report.txt" "$out.log" | sed 's/^/  /'
}
echo "== kvlens eval on the CPU"
run_eval cpu "$work/eval-cpu"
echo "== kvlens eval on OpenCL device $device"
run_eval opencl "$work/eval-opencl" --device "$device"

echo "== agreement per configuration (OpenCL against the CPU)"
/usr/bin/python3 - "$work/eval-cpu/eval_summary.csv" "$work/eval-opencl/eval_summary.csv" <<'EOF'
import csv
import sys


def rows(path):
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    return {(r["scheme"], r["budget"], r["seed"]): r for r in csv.DictReader(lines)}


cpu, dev = rows(sys.argv[1]), rows(sys.argv[2])
ok = set(cpu) == set(dev)
print(f"  {'scheme':<12} {'budget':>6} {'PPL cpu':>12} {'PPL device':>12} {'rel':>9} {'KLD cpu':>12} {'KLD device':>12}"
      f" {'rel':>9} {'same top':>17}")
for key in sorted(cpu):
    a, b = cpu[key], dev.get(key)
    if b is None:
        print(f"  {key[0]:<12} missing on the device")
        ok = False
        continue
    tokens = float(a["tokens"])
    ppl_a, ppl_b = float(a["ppl"]), float(b["ppl"])
    kld_a, kld_b = float(a["kld_mean"]), float(b["kld_mean"])
    top_a, top_b = float(a["same_top1"]), float(b["same_top1"])
    rel_ppl = abs(ppl_b - ppl_a) / abs(ppl_a)
    rel_kld = abs(kld_b - kld_a) / abs(kld_a) if kld_a else abs(kld_b - kld_a)
    good = rel_ppl <= 1e-4 and abs(kld_b - kld_a) <= 1e-7 + 1e-4 * abs(kld_a) \
        and abs(top_b - top_a) * tokens <= max(1.0, tokens / 1000.0)
    ok = ok and good
    print(f"  {key[0]:<12} {key[1]:>6} {ppl_a:12.6g} {ppl_b:12.6g} {rel_ppl:9.1e} {kld_a:12.6g} {kld_b:12.6g}"
          f" {rel_kld:9.1e} {top_a:8.4f}/{top_b:8.4f} {'' if good else '  DISAGREES'}")
print("  agreement: " + ("yes" if ok else "NO"))
sys.exit(0 if ok else 1)
EOF
