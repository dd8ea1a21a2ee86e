// SPDX-License-Identifier: GPL-3.0-or-later
// kvlens-lm-bench: tokens/s and GFLOP/s of the transformer forward (core/lm) for a GPT-2-small-shaped
// random-weight model and the shipped tiny Llama, against their FLOP floors at the SGEMM rate
// measured in the same run.
#include "bench/bench_util.h"
#include "core/common/memory.h"
#include "core/lm/transformer.h"
#include "core/rng/rng.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <string>
#include <thread>

using namespace kvlens;
using namespace kvlens::lm;
using namespace kvlens::bench;

namespace {

void fill(RowMatrixXf& m, Eigen::Index rows, Eigen::Index cols, Rng& rng, double scale)
{
    m.resize(rows, cols);
    for (Eigen::Index i = 0; i < m.size(); ++i)
        m.data()[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * scale);
}

void fill(RowVectorXf& v, Eigen::Index n, Rng& rng, double scale, double offset = 0.0)
{
    v.resize(n);
    for (Eigen::Index i = 0; i < n; ++i)
        v(i) = static_cast<float>(offset + (2.0 * rng.uniform() - 1.0) * scale);
}

/// GPT-2 small's shape (12 layers, 768 wide, 12 heads, MLP 3072, vocab 50257, 1024 positions),
/// uniform random weights (seed 1).
Transformer gpt2Small(int threads)
{
    ModelConfig c;
    c.source = "random GPT-2 small";
    c.architecture = Architecture::Gpt2;
    c.layers = 12;
    c.hidden = 768;
    c.heads = c.kvHeads = 12;
    c.headDim = 64;
    c.intermediate = 3072;
    c.vocab = 50257;
    c.maxPositions = 1024;
    c.normEps = 1e-5;
    c.tiedEmbeddings = c.qkvBias = c.outBias = true;
    Rng rng(EngineKind::Pcg64, 1);
    ModelWeights w;
    const double s = 0.05;
    fill(w.embed, c.vocab, c.hidden, rng, s);
    fill(w.positions, c.maxPositions, c.hidden, rng, s);
    for (int l = 0; l < c.layers; ++l) {
        LayerWeights lw;
        fill(lw.attnNorm, c.hidden, rng, 0.1, 1.0);
        fill(lw.attnNormBias, c.hidden, rng, 0.1);
        fill(lw.qkv, c.qkvRows(), c.hidden, rng, s);
        fill(lw.qkvBias, c.qkvRows(), rng, s);
        fill(lw.out, c.hidden, c.hidden, rng, s);
        fill(lw.outBias, c.hidden, rng, s);
        fill(lw.mlpNorm, c.hidden, rng, 0.1, 1.0);
        fill(lw.mlpNormBias, c.hidden, rng, 0.1);
        fill(lw.up, c.intermediate, c.hidden, rng, s);
        fill(lw.upBias, c.intermediate, rng, s);
        fill(lw.down, c.hidden, c.intermediate, rng, s);
        fill(lw.downBias, c.hidden, rng, s);
        w.layers.push_back(std::move(lw));
    }
    fill(w.finalNorm, c.hidden, rng, 0.1, 1.0);
    fill(w.finalNormBias, c.hidden, rng, 0.1);
    auto m = Transformer::create(std::move(c), std::move(w), threads);
    if (!m) {
        std::fprintf(stderr, "%s\n", m.error().text().c_str());
        std::exit(1);
    }
    return std::move(*m);
}

/// Returns the keys and values unchanged: the cost of the hook's copies and calls.
class CopyHook : public KvCacheHook {
public:
    bool quantizes(int) const override { return true; }
    void apply(int, int, const RowMatrixXf& k, const RowMatrixXf& v, RowMatrixXf& khat, RowMatrixXf& vhat) const override
    {
        khat = k;
        vhat = v;
    }
};

struct Timing {
    std::string what;
    int tokens = 0;
    double ms = 0.0;
    double flops = 0.0;
    double sgemm = 0.0; ///< GFLOP/s of a 1024^3 SGEMM on the same threads, the better of just before and just after
};

/// Times one forward configuration (median of 5 after a warm-up) and its FLOPs, between two SGEMM
/// measurements: on a shared machine the rate moves within a run, so each figure is set against
/// the machine as it was while that figure was taken.
Timing measure(const char* what, const Transformer& m, const std::vector<std::int32_t>& tokens, const ForwardOptions& o)
{
    const double before = sgemmGflops(1024, m.threads());
    const int t = static_cast<int>(tokens.size());
    const double ms = medianMs(
        [&] {
            auto r = m.forward(tokens, o);
            if (!r) {
                std::fprintf(stderr, "%s\n", r.error().text().c_str());
                std::exit(1);
            }
        },
        5, 1);
    const ModelConfig& c = m.config();
    // Rows before logitsStart skip the output head: 2 hidden vocab FLOPs each.
    const double flops = c.flopsPerToken(t) * t - 2.0 * c.hidden * double(c.vocab) * o.logitsStart;
    return {what, t, ms, flops, std::max(before, sgemmGflops(1024, m.threads()))};
}

void print(const Timing& r)
{
    const double sgemm = r.sgemm;
    const double gflops = r.flops / (r.ms * 1e6);
    const double floorMs = r.flops / (sgemm * 1e6);
    std::printf("  %-40s %7.1f ms %7.0f tokens/s %6.1f GFLOP/s = %3.0f%% of SGEMM %5.1f (floor %.1f ms, %.0f tokens/s)\n",
                r.what.c_str(), r.ms, r.tokens / (r.ms / 1000.0), gflops, 100.0 * gflops / sgemm, sgemm, floorMs,
                r.tokens / (floorMs / 1000.0));
}

} // namespace

int main(int argc, char** argv)
{
    int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::string models = KVLENS_MODELS_DIR;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--threads" && i + 1 < argc)
            threads = std::max(1, std::atoi(argv[++i]));
        else if (a == "--models" && i + 1 < argc)
            models = argv[++i];
        else {
            std::printf("usage: kvlens-lm-bench [--threads N] [--models DIR]\n"
                        "Tokens/s and GFLOP/s of one 512-token forward, against the FLOP floor at the SGEMM rate of this run.\n");
            return a == "--help" || a == "-h" ? 0 : 2;
        }
    }
    // A forward allocates its activations afresh (the logits alone are T x vocab floats); reusing
    // freed heap spares the first-touch page faults, as the experiment runner does.
    retainFreedMemory();
    std::printf("kvlens-lm-bench: medians of 5 forwards after a warm-up, %d threads; each against a 1024^3 SGEMM on\n"
                "the same threads measured just before and just after it (the better of the two)\n\n", threads);

    std::vector<Timing> gpt2, tiny;
    std::string gpt2Line, tinyLine;
    {
        const Transformer m = gpt2Small(threads);
        std::vector<std::int32_t> tokens(512);
        Rng rng(EngineKind::Pcg64, 2);
        for (auto& id : tokens)
            id = static_cast<std::int32_t>(rng.nextU64() % 50257);
        char line[256];
        std::snprintf(line, sizeof line,
                      "GPT-2-small-shaped, random weights: %lld non-embedding parameters, %.3f GFLOP per token at T = 512",
                      static_cast<long long>(m.config().nonEmbeddingParameters()), m.config().flopsPerToken(512) / 1e9);
        gpt2Line = line;
        gpt2.push_back(measure("512 tokens, all logits", m, tokens, {}));
        ForwardOptions half;
        half.logitsStart = 256;
        gpt2.push_back(measure("512 tokens, logits of the second half", m, tokens, half));
        CopyHook hook;
        half.cache = &hook;
        gpt2.push_back(measure("  ... with a copying cache hook", m, tokens, half));
        half.damage = DamageRequest{256, nullptr};
        gpt2.push_back(measure("  ... and the proxies' damage, second half", m, tokens, half));
        half.damage.reset();
        half.residual = 128;
        gpt2.push_back(measure("  ... and a residual window of 128", m, tokens, half));
    }
    {
        LoadOptions options;
        options.threads = threads;
        auto m = Transformer::load(models + "/tiny-llama", options);
        if (m) {
            std::ifstream held(models + "/tiny-llama/heldout.txt", std::ios::binary);
            std::vector<std::int32_t> tokens;
            for (char ch; tokens.size() < 512 && held.get(ch);)
                tokens.push_back(static_cast<unsigned char>(ch));
            char line[256];
            std::snprintf(line, sizeof line, "tiny-llama (%s): %lld non-embedding parameters, %.4f GFLOP per token at T = 512",
                          m->config().summary().c_str(), static_cast<long long>(m->config().nonEmbeddingParameters()),
                          m->config().flopsPerToken(512) / 1e9);
            tinyLine = line;
            tiny.push_back(measure("512 bytes of heldout.txt, all logits", *m, tokens, {}));
            ForwardOptions half;
            half.logitsStart = 256;
            CopyHook hook;
            half.cache = &hook;
            tiny.push_back(measure("  second half's logits, copying cache hook", *m, tokens, half));
            half.damage = DamageRequest{256, nullptr};
            tiny.push_back(measure("  ... and the proxies' damage, second half", *m, tokens, half));
            const std::vector<std::int32_t> first(tokens.begin(), tokens.begin() + 128);
            tiny.push_back(measure("128 bytes, all logits", *m, first, {}));
        } else {
            tinyLine = "(shipped model not found: " + m.error().text() + ")";
        }
    }
    std::printf("%s\n", gpt2Line.c_str());
    for (const Timing& t : gpt2)
        print(t);
    std::printf("\n%s\n", tinyLine.c_str());
    for (const Timing& t : tiny)
        print(t);
    return 0;
}
