// SPDX-License-Identifier: GPL-3.0-or-later
// Transforms wht (randomized Walsh-Hadamard, TurboQuant's rotation) and wht_permuted (a seeded
// coordinate permutation first, which breaks the coherence of axis-aligned subspaces).
#include "core/quant/part_support.h"

#include "core/quant/wht.h"

#include <numeric>

namespace kvlens::parts {

namespace {

/// x' = H D [x, 0] / sqrt(dim): orthogonal, so scores in the rotated basis are the originals.
class WhtPlan final : public TransformPlan {
public:
    WhtPlan(int in, std::vector<float> signs, std::vector<int> permutation)
        : m_in(in), m_signs(std::move(signs)), m_permutation(std::move(permutation))
    {
    }
    int outDim() const override { return static_cast<int>(m_signs.size()); }
    void forward(const Eigen::Ref<const RowMatrixXf>& x, RowMatrixXf& out) const override
    {
        if (m_permutation.empty()) {
            rotateRows(x, m_signs, out);
            return;
        }
        // Stored coordinate i is original coordinate permutation[i].
        RowMatrixXf p(x.rows(), x.cols());
        for (std::size_t i = 0; i < m_permutation.size(); ++i)
            p.col(static_cast<Eigen::Index>(i)) = x.col(m_permutation[i]);
        rotateRows(p, m_signs, out);
    }
    void inverse(const Eigen::Ref<const RowMatrixXf>& y, RowMatrixXf& out) const override
    {
        if (m_permutation.empty()) {
            unrotateRows(y, m_signs, static_cast<std::size_t>(m_in), out);
            return;
        }
        RowMatrixXf p;
        unrotateRows(y, m_signs, static_cast<std::size_t>(m_in), p);
        out.resize(p.rows(), p.cols());
        for (std::size_t i = 0; i < m_permutation.size(); ++i)
            out.col(m_permutation[i]) = p.col(static_cast<Eigen::Index>(i));
    }
    const std::vector<float>* whtSigns() const override { return m_permutation.empty() ? &m_signs : nullptr; }
    const std::vector<int>* permutation() const override { return m_permutation.empty() ? nullptr : &m_permutation; }

private:
    int m_in;
    std::vector<float> m_signs;
    std::vector<int> m_permutation;
};

PartKind wht(bool permuted)
{
    PartKind k;
    k.name = permuted ? "wht_permuted" : "wht";
    k.role = PartRole::Transform;
    k.description = permuted ? "A seeded permutation of the coordinates, then the randomized Walsh-Hadamard rotation "
                               "(same signs; no bits): removes the coherence of subspaces on the first axes."
                             : "Randomized Walsh-Hadamard rotation H D x / sqrt(dim), zero-padded to a power of two "
                               "(the padding is counted in the bits); queries rotate with the same signs.";
    k.planTransform = [permuted](const CodecPart&, PlanContext& c) -> std::shared_ptr<const TransformPlan> {
        const int dim = static_cast<int>(paddedDimension(static_cast<std::size_t>(c.dim)));
        Rng rng(c.engine, c.seed, signStream(c.site));
        std::vector<float> signs = randomSigns(static_cast<std::size_t>(dim), rng);
        std::vector<int> permutation;
        if (permuted) {
            // Fisher-Yates over the input coordinates, after the signs (the signs stay TQ's).
            permutation.resize(static_cast<std::size_t>(c.dim));
            std::iota(permutation.begin(), permutation.end(), 0);
            for (int i = c.dim - 1; i > 0; --i)
                std::swap(permutation[static_cast<std::size_t>(i)],
                          permutation[static_cast<std::size_t>(rng.below(static_cast<std::uint64_t>(i) + 1))]);
        }
        return std::make_shared<WhtPlan>(c.dim, std::move(signs), std::move(permutation));
    };
    return k;
}

} // namespace

std::vector<PartKind> whtParts()
{
    return {wht(false), wht(true)};
}

} // namespace kvlens::parts
