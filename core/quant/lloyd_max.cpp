// SPDX-License-Identifier: GPL-3.0-or-later
// Lloyd-Max design: alternate "thresholds at midpoints" and "levels at conditional means".
#include "core/quant/lloyd_max.h"

#include "core/common/math_policy.h"

#include <boost/math/distributions/normal.hpp>
#include <boost/math/special_functions/beta.hpp>
#include <boost/math/special_functions/erf.hpp>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <map>
#include <mutex>
#include <numbers>
#include <numeric>
#include <tuple>

namespace kvlens {

std::string_view codebookLawName(CodebookLaw law)
{
    switch (law) {
    case CodebookLaw::Beta: return "beta";
    case CodebookLaw::Gaussian: return "gauss";
    case CodebookLaw::Empirical: return "empirical";
    }
    return "beta";
}

std::optional<CodebookLaw> codebookLawFromName(std::string_view name)
{
    if (name == "beta")
        return CodebookLaw::Beta;
    if (name == "gauss" || name == "gaussian")
        return CodebookLaw::Gaussian;
    if (name == "empirical")
        return CodebookLaw::Empirical;
    return std::nullopt;
}

namespace {

/// A symmetric law on which Lloyd-Max runs over the non-negative half-line only.
/// For a cell [a, b] with 0 <= a < b it gives the probability and the first moment.
struct HalfLaw {
    virtual ~HalfLaw() = default;
    virtual double upperTail(double a) const = 0;           ///< P(t > a)
    virtual double firstMomentBeyond(double a) const = 0;   ///< E[t 1(t > a)]
    virtual double density(double t) const = 0;              ///< f(t), t >= 0
    virtual double quantile(double p) const = 0;            ///< of the compander-density init law
    virtual double support() const = 0;                     ///< right end (inf for Gaussian)
    virtual double variance() const = 0;
};

struct BetaHalfLaw final : HalfLaw {
    explicit BetaHalfLaw(int dim)
        : alpha(0.5 * (dim - 1)), k(0.5 * (dim - 3))
    {
        // integral over [-1, 1] of (1 - t^2)^k dt = B(1/2, k + 1).
        logNormaliser = std::log(boost::math::beta(0.5, k + 1.0, kMathPolicy));
        // Panter-Dite: the optimal level density is proportional to f^(1/3), here again a
        // sphere law with exponent k/3, i.e. Beta(k/3 + 1, k/3 + 1) on (t+1)/2.
        initAlpha = k / 3.0 + 1.0;
        var = 1.0 / dim;
    }
    double upperTail(double a) const override
    {
        if (a >= 1.0)
            return 0.0;
        return boost::math::ibetac(alpha, alpha, 0.5 * (a + 1.0), kMathPolicy);
    }
    double firstMomentBeyond(double a) const override
    {
        if (a >= 1.0)
            return 0.0;
        // integral_a^1 t (1-t^2)^k dt = (1-a^2)^(k+1) / (2(k+1)).
        const double logValue = (k + 1.0) * std::log1p(-a * a) - std::log(2.0 * (k + 1.0)) - logNormaliser;
        return std::exp(logValue);
    }
    double density(double t) const override
    {
        if (t >= 1.0)
            return k == 0.0 ? std::exp(-logNormaliser) : 0.0;
        return std::exp(k * std::log1p(-t * t) - logNormaliser);
    }
    double quantile(double p) const override
    {
        return 2.0 * boost::math::ibeta_inv(initAlpha, initAlpha, p, kMathPolicy) - 1.0;
    }
    double support() const override { return 1.0; }
    double variance() const override { return var; }

    double alpha, k, logNormaliser = 0.0, initAlpha = 1.0, var = 0.0;
};

struct GaussHalfLaw final : HalfLaw {
    explicit GaussHalfLaw(double s) : sigma(s) {}
    double upperTail(double a) const override
    {
        return 0.5 * boost::math::erfc(a / (sigma * std::numbers::sqrt2), kMathPolicy);
    }
    double firstMomentBeyond(double a) const override
    {
        // E[t 1(t > a)] = sigma * phi(a / sigma) for N(0, sigma^2).
        const double z = a / sigma;
        return sigma * std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi);
    }
    double density(double t) const override
    {
        const double z = t / sigma;
        return std::exp(-0.5 * z * z) / (sigma * std::sqrt(2.0 * std::numbers::pi));
    }
    double quantile(double p) const override
    {
        // Compander init: f^(1/3) of N(0, s^2) is N(0, 3 s^2).
        const boost::math::normal_distribution<double, MathPolicy> law(0.0, sigma * std::sqrt(3.0));
        return boost::math::quantile(law, p);
    }
    double support() const override { return std::numeric_limits<double>::infinity(); }
    double variance() const override { return sigma * sigma; }

    double sigma;
};

void finishCodebook(Codebook& cb)
{
    cb.levelsF.assign(cb.levels.begin(), cb.levels.end());
    cb.thresholdsF.resize(cb.thresholds.size());
    for (std::size_t i = 0; i < cb.thresholds.size(); ++i)
        cb.thresholdsF[i] = static_cast<float>(cb.thresholds[i]);
}

/// The Lloyd map T on the positive half of a symmetric law (levels -> conditional means of their
/// cells) and, for Newton, its tridiagonal Jacobian. Edges: e_0 = 0, e_i = (c_{i-1} + c_i)/2,
/// e_half = support.
class HalfLloydMap {
public:
    HalfLloydMap(const HalfLaw& law, std::size_t half)
        : m_law(law), m_h(half), m_edges(half + 1), m_tail(half + 1), m_moment(half + 1), m_mapped(half), m_prob(half),
          m_lower(half), m_diag(half), m_upper(half), m_rhs(half)
    {
    }

    /// T at `levels`: the cells' edges, probabilities and first moments, and their conditional means.
    void evaluate(const std::vector<double>& levels)
    {
        const std::size_t h = m_h;
        m_edges[0] = 0.0;
        for (std::size_t i = 1; i < h; ++i)
            m_edges[i] = 0.5 * (levels[i - 1] + levels[i]);
        m_edges[h] = m_law.support();
        for (std::size_t i = 0; i <= h; ++i) {
            m_tail[i] = m_law.upperTail(m_edges[i]);
            m_moment[i] = m_law.firstMomentBeyond(m_edges[i]);
        }
        for (std::size_t i = 0; i < h; ++i) {
            // Differences of upper tails: small cells far out keep full relative precision.
            m_prob[i] = m_tail[i] - m_tail[i + 1];
            const double m = m_moment[i] - m_moment[i + 1];
            m_mapped[i] = m_prob[i] > 0.0 ? m / m_prob[i] : 0.5 * (m_edges[i] + std::min(m_edges[i + 1], m_edges[i] + 1.0));
        }
    }

    /// max |T(c)_i - c_i| at the levels last evaluated.
    double maxMove(const std::vector<double>& levels) const
    {
        double move = 0.0;
        for (std::size_t i = 0; i < m_h; ++i)
            move = std::max(move, std::abs(m_mapped[i] - levels[i]));
        return move;
    }

    /// Newton's step on c = T(c) from `c` (last evaluated) into `trial`; false when the step leaves
    /// the levels unordered, outside the support or not finite. A level only sees its two edges:
    /// dT_i/de_i = f(e_i)(T_i - e_i)/P_i, dT_i/de_{i+1} = f(e_{i+1})(e_{i+1} - T_i)/P_i.
    bool newtonStep(const std::vector<double>& c, std::vector<double>& trial)
    {
        const std::size_t h = m_h;
        for (std::size_t i = 0; i < h; ++i) {
            const double dLow = i > 0 && m_prob[i] > 0.0 ? m_law.density(m_edges[i]) * (m_mapped[i] - m_edges[i]) / m_prob[i] : 0.0;
            const double dHigh = i + 1 < h && m_prob[i] > 0.0
                ? m_law.density(m_edges[i + 1]) * (m_edges[i + 1] - m_mapped[i]) / m_prob[i] : 0.0;
            // Row i of J = I - dT/dc, with de_i/dc_{i-1} = de_i/dc_i = 1/2.
            m_lower[i] = -0.5 * dLow;
            m_diag[i] = 1.0 - 0.5 * dLow - 0.5 * dHigh;
            m_upper[i] = -0.5 * dHigh;
            m_rhs[i] = m_mapped[i] - c[i];
        }
        // Thomas algorithm for J delta = T(c) - c.
        for (std::size_t i = 1; i < h; ++i) {
            const double w = m_lower[i] / m_diag[i - 1];
            m_diag[i] -= w * m_upper[i - 1];
            m_rhs[i] -= w * m_rhs[i - 1];
        }
        m_rhs[h - 1] /= m_diag[h - 1];
        for (std::size_t i = h - 1; i-- > 0;)
            m_rhs[i] = (m_rhs[i] - m_upper[i] * m_rhs[i + 1]) / m_diag[i];
        bool ordered = true;
        for (std::size_t i = 0; i < h; ++i) {
            trial[i] = c[i] + m_rhs[i];
            ordered = ordered && std::isfinite(trial[i]) && trial[i] > (i > 0 ? trial[i - 1] : 0.0)
                      && trial[i] < m_law.support();
        }
        return ordered;
    }

    /// sum over the positive cells of 2 c E[t 1] - c^2 P at the levels last evaluated: E[t^2] less
    /// twice this is the exact distortion (per cell E[(t - c)^2] = E[t^2 1] - 2 c E[t 1] + c^2 P).
    double captured(const std::vector<double>& c) const
    {
        double captured = 0.0;
        for (std::size_t i = 0; i < m_h; ++i)
            captured += 2.0 * c[i] * (m_moment[i] - m_moment[i + 1]) - c[i] * c[i] * m_prob[i];
        return captured;
    }

    const std::vector<double>& mapped() const { return m_mapped; }

private:
    const HalfLaw& m_law;
    std::size_t m_h;
    std::vector<double> m_edges, m_tail, m_moment, m_mapped, m_prob;
    std::vector<double> m_lower, m_diag, m_upper, m_rhs; ///< Newton's tridiagonal system
};

/// Iterates the positive levels `c` to the fixed point of T. Plain Lloyd converges linearly with a
/// rate near 1 for many levels (256 levels took ~10^5 sweeps), so after a few sweeps Newton's method
/// on c = T(c) finishes the job quadratically (its Jacobian is tridiagonal); a Newton step is taken
/// only when it moves less than the Lloyd step would.
void iterateHalf(HalfLloydMap& map, std::vector<double>& c, const LloydOptions& options, Codebook& cb)
{
    const std::size_t h = c.size();
    std::vector<double> trial(h);
    int iteration = 0;
    bool converged = false;
    map.evaluate(c);
    double move = map.maxMove(c);
    while (iteration < options.maxIterations && !(converged = move < options.tolerance)) {
        ++iteration;
        bool newtonTaken = false;
        if (iteration > 8 && h > 1 && map.newtonStep(c, trial)) {
            map.evaluate(trial);
            const double trialMove = map.maxMove(trial);
            if (trialMove < move) {
                c.swap(trial);
                move = trialMove;
                newtonTaken = true;
            } else {
                map.evaluate(c); // restore T(c) for the Lloyd step below
            }
        }
        if (!newtonTaken) {
            c = map.mapped();
            map.evaluate(c);
            move = map.maxMove(c);
        }
    }
    cb.iterations = iteration;
    cb.converged = converged;
}

/// Lloyd-Max on a symmetric law: only the L/2 positive levels are iterated (the middle
/// threshold is 0 by symmetry), then mirrored.
Codebook designSymmetric(const HalfLaw& law, CodebookLaw kind, int dim, int bits, const LloydOptions& options)
{
    assert(bits >= 1 && bits <= 8 && "Lloyd-Max codebooks cover 1..8 bits");
    Codebook cb;
    cb.law = kind;
    cb.dim = dim;
    cb.bits = bits;
    cb.variance = law.variance();
    const int levels = 1 << bits;
    const int half = levels / 2;

    // Initial positive levels at the compander-law quantiles of the upper cells.
    std::vector<double> c(static_cast<std::size_t>(half));
    for (int i = 0; i < half; ++i)
        c[static_cast<std::size_t>(i)] = law.quantile((half + i + 0.5) / levels);
    HalfLloydMap map(law, static_cast<std::size_t>(half));
    iterateHalf(map, c, options, cb);

    cb.levels.resize(static_cast<std::size_t>(levels));
    for (int i = 0; i < half; ++i) {
        cb.levels[static_cast<std::size_t>(half + i)] = c[static_cast<std::size_t>(i)];
        cb.levels[static_cast<std::size_t>(half - 1 - i)] = -c[static_cast<std::size_t>(i)];
    }
    cb.thresholds.resize(static_cast<std::size_t>(levels - 1));
    for (int i = 0; i + 1 < levels; ++i)
        cb.thresholds[static_cast<std::size_t>(i)] =
            0.5 * (cb.levels[static_cast<std::size_t>(i)] + cb.levels[static_cast<std::size_t>(i + 1)]);
    // Exact distortion at the final levels, twice the positive half.
    map.evaluate(c);
    cb.mse = law.variance() - 2.0 * map.captured(c);
    finishCodebook(cb);
    return cb;
}

} // namespace

Codebook designBetaCodebook(int dim, int bits, const LloydOptions& options)
{
    assert(dim >= 3 && "the Beta sphere law needs dim >= 3");
    return designSymmetric(BetaHalfLaw(dim), CodebookLaw::Beta, dim, bits, options);
}

Codebook designGaussianCodebook(int dim, int bits, const LloydOptions& options)
{
    const double sigma = dim > 0 ? 1.0 / std::sqrt(static_cast<double>(dim)) : 1.0;
    return designSymmetric(GaussHalfLaw(sigma), CodebookLaw::Gaussian, dim, bits, options);
}

Codebook designEmpiricalCodebook(std::span<const float> samples, int bits, int dim, const LloydOptions& options)
{
    assert(bits >= 1 && bits <= 8);
    Codebook cb;
    cb.law = CodebookLaw::Empirical;
    cb.dim = dim;
    cb.bits = bits;
    const int levels = 1 << bits;
    if (samples.empty()) {
        cb.levels.assign(static_cast<std::size_t>(levels), 0.0);
        cb.thresholds.assign(static_cast<std::size_t>(levels - 1), 0.0);
        finishCodebook(cb);
        return cb;
    }
    std::vector<double> x(samples.begin(), samples.end());
    std::sort(x.begin(), x.end());
    const std::size_t n = x.size();
    std::vector<double> prefix(n + 1, 0.0), prefix2(n + 1, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
        prefix[i + 1] = prefix[i] + x[i];
        prefix2[i + 1] = prefix2[i] + x[i] * x[i];
    }
    cb.variance = prefix2[n] / static_cast<double>(n);

    std::vector<double> c(static_cast<std::size_t>(levels));
    if (options.initialLevels.size() == static_cast<std::size_t>(levels)) {
        c = options.initialLevels;
        std::sort(c.begin(), c.end());
    } else {
        for (int i = 0; i < levels; ++i) {
            const double q = (i + 0.5) / levels * static_cast<double>(n - 1);
            c[static_cast<std::size_t>(i)] = x[static_cast<std::size_t>(q)];
        }
    }
    std::vector<std::size_t> start(static_cast<std::size_t>(levels + 1));
    auto assignCells = [&] {
        start[0] = 0;
        for (int i = 1; i < levels; ++i) {
            const double t = 0.5 * (c[static_cast<std::size_t>(i - 1)] + c[static_cast<std::size_t>(i)]);
            // Values equal to a threshold go to the lower cell, as Codebook::encode does.
            start[static_cast<std::size_t>(i)] =
                static_cast<std::size_t>(std::upper_bound(x.begin(), x.end(), t) - x.begin());
        }
        start[static_cast<std::size_t>(levels)] = n;
    };
    int iteration = 0;
    bool converged = false;
    for (; iteration < options.maxIterations && !converged; ++iteration) {
        assignCells();
        double maxMove = 0.0;
        for (int i = 0; i < levels; ++i) {
            const std::size_t a = start[static_cast<std::size_t>(i)], b = start[static_cast<std::size_t>(i + 1)];
            if (b > a) {
                const double next = (prefix[b] - prefix[a]) / static_cast<double>(b - a);
                maxMove = std::max(maxMove, std::abs(next - c[static_cast<std::size_t>(i)]));
                c[static_cast<std::size_t>(i)] = next;
            }
        }
        // Empty cells keep their level; keep levels strictly ordered so thresholds stay sorted.
        for (int i = 1; i < levels; ++i)
            if (c[static_cast<std::size_t>(i)] <= c[static_cast<std::size_t>(i - 1)])
                c[static_cast<std::size_t>(i)] = std::nextafter(c[static_cast<std::size_t>(i - 1)],
                                                                std::numeric_limits<double>::infinity());
        converged = maxMove < options.tolerance * std::max(1.0, std::sqrt(cb.variance));
    }
    cb.iterations = iteration;
    cb.converged = converged;
    cb.levels = c;
    cb.thresholds.resize(static_cast<std::size_t>(levels - 1));
    for (int i = 0; i + 1 < levels; ++i)
        cb.thresholds[static_cast<std::size_t>(i)] = 0.5 * (c[static_cast<std::size_t>(i)] + c[static_cast<std::size_t>(i + 1)]);
    assignCells();
    double sse = 0.0;
    for (int i = 0; i < levels; ++i) {
        const std::size_t a = start[static_cast<std::size_t>(i)], b = start[static_cast<std::size_t>(i + 1)];
        const double ci = c[static_cast<std::size_t>(i)];
        const double cnt = static_cast<double>(b - a);
        sse += (prefix2[b] - prefix2[a]) - 2.0 * ci * (prefix[b] - prefix[a]) + ci * ci * cnt;
    }
    cb.mse = std::max(0.0, sse / static_cast<double>(n));
    finishCodebook(cb);
    return cb;
}

Codebook affineCodebook(const Codebook& base, double shift, double scale)
{
    Codebook cb = base;
    for (double& level : cb.levels)
        level = shift + scale * level;
    for (double& threshold : cb.thresholds)
        threshold = shift + scale * threshold;
    cb.mse = base.mse * scale * scale;
    cb.variance = base.variance * scale * scale;
    finishCodebook(cb);
    return cb;
}

std::shared_ptr<const Codebook> cachedCodebook(CodebookLaw law, int dim, int bits)
{
    assert(law != CodebookLaw::Empirical && "empirical codebooks depend on data and are not cached");
    static std::mutex mutex;
    static std::map<std::tuple<int, int, int>, std::shared_ptr<const Codebook>> cache;
    const auto key = std::make_tuple(static_cast<int>(law), dim, bits);
    {
        const std::lock_guard lock(mutex);
        if (auto it = cache.find(key); it != cache.end())
            return it->second;
    }
    // Designed outside the lock (a 256-level design takes a while); a race designs twice
    // and keeps the first, which is harmless because the design is deterministic.
    auto designed = std::make_shared<const Codebook>(law == CodebookLaw::Beta ? designBetaCodebook(dim, bits)
                                                                                : designGaussianCodebook(dim, bits));
    const std::lock_guard lock(mutex);
    return cache.emplace(key, std::move(designed)).first->second;
}

} // namespace kvlens
