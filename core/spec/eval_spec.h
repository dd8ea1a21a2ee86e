// SPDX-License-Identifier: GPL-3.0-or-later
// EvalSpec: an evaluation of KV-cache schemes on a transformer's next-token output (kvlens eval),
// the spec-file form of it, and its checks.
#pragma once

#include "core/common/result.h"
#include "core/quant/scheme.h"
#include "core/spec/spec.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens {

/// One configuration the evaluator compares with the exact cache: a scheme at a budget, the same
/// on every layer, or per layer (an allocation file: layers[l] is layer l's scheme).
struct EvalScheme {
    SchemeConfig scheme;               ///< its name names the configuration
    std::vector<SchemeConfig> layers;  ///< per layer (an allocation); empty: `scheme` everywhere
    std::string origin;                ///< the allocation file it came from ("" for a scheme)
    bool operator==(const EvalScheme&) const = default;
};

/// Per-layer attribution: the damage when only one layer's cache (K only, V only, both) is quantized.
enum class Attribution {
    None,
    Layers, ///< every layer, paths K, V and both
    Heads,  ///< also every (layer, KV head), both paths
};
std::string_view attributionName(Attribution a); ///< "none", "layers", "heads"

/// `kvlens eval` as data: a model folder, a text (or token ids), the configurations, the chunking.
/// The text is cut into chunks of `ctx` tokens after `calibrationTokens` tokens reserved for the
/// calibrated schemes (never scored); each chunk is one causal forward pass and its second half is
/// scored (llama.cpp's convention), the reference and every configuration in lockstep.
struct EvalSpec {
    std::string name = "eval";
    std::string modelDir;            ///< a Hugging Face model folder
    std::string textFile;            ///< UTF-8 text, tokenized by the model's tokenizer ...
    std::string tokensFile;          ///< ... or token ids (.npy int32/int64): exactly one of the two
    int ctx = 512;                   ///< tokens per chunk (at most the model's context)
    int chunks = 0;                  ///< chunks scored (0: every whole chunk of the text)
    int calibrationTokens = -1;      ///< tokens before the first chunk for calibration (-1: one chunk when a scheme calibrates, else 0)
    std::vector<EvalScheme> schemes;
    std::vector<int> budgets = {2, 3, 4};
    std::uint64_t firstSeed = 1;     ///< each (layer, KV head) draws its signs and sketches from the seed and its own index
    int seedCount = 1;
    int residual = 0;                ///< R > 0: the R most recent tokens of each query stay exact
    /// llama.cpp's cache types measured as llama.cpp computes them: each query converted to the key
    /// type's vec_dot_type before the score product (ggml's CPU path); false keeps queries float32
    /// (the codec alone). JSON "query_conversion": "ggml" | "none".
    bool ggmlQueryConversion = true;
    Attribution attribution = Attribution::Layers;
    bool parseSpecialTokens = true;  ///< byte-level BPE: match special tokens in the text
    int threads = 0;                 ///< worker threads of a forward (0: all)
    double memoryLimitMb = 0.0;      ///< 0: lm::defaultMemoryLimitMiB() (most of physical memory)
    /// Where the forward passes run: cpu; opencl (the OpenCL device `device` names: an index or a name
    /// substring, else $KVLENS_OPENCL_DEVICE, the first GPU, the first CPU device); auto (whichever of
    /// the two ran one timed chunk faster). The app installs the device (EvalCallbacks::prepare); core
    /// alone computes on the CPU. JSON "backend", "device", written only when not cpu / empty. They
    /// arrange where, not what: evalSpecHash leaves them out, as it does threads.
    BackendKind backend = BackendKind::Cpu;
    std::string device;
    bool operator==(const EvalSpec&) const = default;

    std::uint64_t seed(int index) const { return firstSeed + static_cast<std::uint64_t>(index); }
    /// schemes x budgets x seeds.
    long long configurationCount() const;
};

/// Limits of an eval spec's fields.
struct EvalLimits {
    static constexpr int kMinCtx = 4;
    static constexpr int kMaxCtx = 1 << 17;
    static constexpr int kMaxChunks = 1 << 20;
    static constexpr int kMaxConfigurations = 4096;
    static constexpr int kMaxSeeds = 1000;
    /// memory_limit_mb: at most 2^30 MiB (1 PiB), so the limit in bytes never wraps.
    static constexpr double kMaxMemoryLimitMb = 1073741824.0;
};

/// Checks every field (ranges, one of text and tokens, schemes valid at every budget for a head
/// dimension `headDim` when it is known: > 0), naming the field.
Status checkEvalSpec(const EvalSpec& spec, int headDim = 0);

/// The seed of (seed, layer, KV head): each cell of the model draws its own rotation and sketch.
std::uint64_t cellSeed(std::uint64_t seed, int layer, int kvHead);

} // namespace kvlens

namespace kvlens {

/// True when `text` is a JSON object with a "kvlens_eval" key (an eval spec, not an experiment spec).
bool isEvalSpecText(std::string_view text);
/// Parses an eval spec: {"kvlens_eval": 1, "name", "model", "text" | "tokens", "ctx", "chunks",
/// "calibration_tokens", "schemes" (names, compositions, {"allocation": FILE}: one configuration
/// whose layers take the file's widths or llama.cpp types, or {"name", "layers": [scheme, ...]}), "budgets", "seeds": {"first", "count"},
/// "residual", "attribution" (none | layers | heads), "parse_special", "threads", "memory_limit_mb",
/// "query_conversion" (ggml | none), "backend" (cpu | opencl | auto), "device" (an index or a name)}.
/// Relative paths are looked up in `baseDirectory` first. Strict, as specFromJson; checkEvalSpec
/// runs on the result.
Result<EvalSpec> evalSpecFromJson(std::string_view text, const std::string& baseDirectory = {});
/// Every field, canonical; evalSpecFromJson(evalSpecToJson(s)) == s for a checked spec.
std::string evalSpecToJson(const EvalSpec& spec, int indent = 2);
/// Reads and parses an eval spec file (a regular file of at most io::kMaxSpecBytes).
Result<EvalSpec> loadEvalSpecFile(const std::string& path);

} // namespace kvlens
