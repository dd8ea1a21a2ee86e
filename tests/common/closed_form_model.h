// SPDX-License-Identifier: GPL-3.0-or-later
// A one-layer transformer whose attention weights and logits have a closed form (tests of the
// forward pass and of the evaluator's drill-down).
#pragma once

#include "core/lm/transformer.h"

#include <QtGlobal>

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvlens::test::closed_form {

using namespace kvlens::lm;


inline constexpr double kA = 2.0;    // q/k gain
inline constexpr double kEps = 1e-6; // RMSNorm epsilon
inline constexpr int kVocab = 6;

inline double phi(int token)
{
    return 0.7 * token + 0.3;
}

inline double headEntry(int v, int i)
{
    return std::sin(v + 2.0 * i);
}

/// One layer, hidden 4, two query heads of dimension 4 sharing one KV head, MLP weights zero.
/// Embedding of token k: (1, 1, cos phi_k, sin phi_k), so every RMS-normed input is e / r0 with the
/// same r0 = sqrt(3/4 + eps). q (head 0) = (a h_0, 0, 0, 0), q (head 1) = (0, a h_0, 0, 0),
/// k = (0, 0, a h_0, 0), v = (h_2, h_3, 0, 0); o_proj sends head 0's first two output dimensions
/// to hidden 0, 1 and head 1's to hidden 2, 3.
inline Transformer closedFormModel(int threads = 2, int slidingWindow = 0)
{
    ModelConfig c;
    c.source = "closed-form";
    c.architecture = Architecture::Llama;
    c.layers = 1;
    c.hidden = 4;
    c.heads = 2;
    c.kvHeads = 1;
    c.headDim = 4;
    c.intermediate = 2;
    c.vocab = kVocab;
    c.maxPositions = 64;
    c.normEps = kEps;
    c.ropeTheta = 10000.0;
    c.slidingWindow = slidingWindow;
    ModelWeights w;
    w.embed.resize(kVocab, 4);
    for (int k = 0; k < kVocab; ++k)
        w.embed.row(k) << 1.0f, 1.0f, float(std::cos(phi(k))), float(std::sin(phi(k)));
    LayerWeights l;
    l.attnNorm = RowVectorXf::Ones(4);
    l.qkv = RowMatrixXf::Zero(16, 4);
    l.qkv(0, 0) = float(kA);  // head 0, dim 0
    l.qkv(5, 0) = float(kA);  // head 1, dim 1
    l.qkv(10, 0) = float(kA); // k, dim 2
    l.qkv(12, 2) = 1.0f;      // v dim 0 = h_2
    l.qkv(13, 3) = 1.0f;      // v dim 1 = h_3
    l.out = RowMatrixXf::Zero(4, 8);
    l.out(0, 0) = l.out(1, 1) = l.out(2, 4) = l.out(3, 5) = 1.0f;
    l.mlpNorm = RowVectorXf::Ones(4);
    l.up = RowMatrixXf::Zero(4, 4);
    l.down = RowMatrixXf::Zero(4, 2);
    w.layers.push_back(l);
    w.finalNorm = RowVectorXf::Ones(4);
    w.lmHead.resize(kVocab, 4);
    for (int v = 0; v < kVocab; ++v)
        for (int i = 0; i < 4; ++i)
            w.lmHead(v, i) = float(headEntry(v, i));
    auto m = Transformer::create(c, w, threads);
    if (!m)
        qFatal("%s", m.error().text().c_str());
    return std::move(*m);
}

/// The first key query t attends to with a sliding window of `window` keys (0: none): Hugging Face's
/// mask keeps t - window < j <= t.
inline int windowStart(int t, int window)
{
    return window > 0 ? std::max(0, t - window + 1) : 0;
}

/// Head 0's attention weights of query t: softmax_j<=t of (a u)^2 / 2 sin(t - j), u = 1 / r0:
/// rotate-half RoPE turns q = (a u, 0, 0, 0) into (a u cos t, 0, a u sin t, 0) (dimensions 0 and 2
/// pair, frequency theta^0 = 1) and k = (0, 0, a u, 0) into (-a u sin j, 0, a u cos j, 0). Keys
/// before a sliding window get weight 0.
inline std::vector<double> closedFormWeights(int t, int window = 0)
{
    const double u = 1.0 / std::sqrt(0.75 + kEps);
    const int lo = windowStart(t, window);
    std::vector<double> s(static_cast<std::size_t>(t + 1), 0.0);
    double mx = -1e300, sum = 0.0;
    for (int j = lo; j <= t; ++j)
        mx = std::max(mx, s[std::size_t(j)] = (kA * u) * (kA * u) / 2.0 * std::sin(double(t - j)));
    for (int j = lo; j <= t; ++j)
        sum += (s[std::size_t(j)] = std::exp(s[std::size_t(j)] - mx));
    for (double& x : s)
        x /= sum;
    return s;
}

/// The closed form's logits [T x vocab]: head 1's scores are 0 (its query sits on dimensions 1, 3,
/// the key on 0, 2), so it averages v_j over the keys it sees (j <= t, inside the window).
inline RowMatrixXd closedFormLogits(const std::vector<std::int32_t>& tokens, int window = 0)
{
    const int T = static_cast<int>(tokens.size());
    const double u = 1.0 / std::sqrt(0.75 + kEps);
    RowMatrixXd out(T, kVocab);
    for (int t = 0; t < T; ++t) {
        const std::vector<double> p = closedFormWeights(t, window);
        const int lo = windowStart(t, window);
        double h0a = 0, h0b = 0, h1a = 0, h1b = 0;
        for (int j = lo; j <= t; ++j) {
            const double v0 = std::cos(phi(tokens[std::size_t(j)])) * u, v1 = std::sin(phi(tokens[std::size_t(j)])) * u;
            h0a += p[std::size_t(j)] * v0;
            h0b += p[std::size_t(j)] * v1;
            h1a += v0 / (t - lo + 1);
            h1b += v1 / (t - lo + 1);
        }
        const double k = phi(tokens[std::size_t(t)]);
        const double x[4] = {1.0 + h0a, 1.0 + h0b, std::cos(k) + h1a, std::sin(k) + h1b};
        const double ms = (x[0] * x[0] + x[1] * x[1] + x[2] * x[2] + x[3] * x[3]) / 4.0;
        const double r = 1.0 / std::sqrt(ms + kEps);
        for (int v = 0; v < kVocab; ++v) {
            double l = 0;
            for (int i = 0; i < 4; ++i)
                l += headEntry(v, i) * x[i] * r;
            out(t, v) = l;
        }
    }
    return out;
}


} // namespace kvlens::test::closed_form
