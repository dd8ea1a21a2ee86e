// SPDX-License-Identifier: GPL-3.0-or-later
// Named schemes of papers A, B and C, and name <-> enum conversions.
#include "core/quant/scheme.h"

#include "core/quant/codec.h"

#include <charconv>
#include <cmath>

namespace kvlens {

std::string_view rotationName(Rotation r)
{
    switch (r) {
    case Rotation::None: return "none";
    case Rotation::Wht: return "wht";
    case Rotation::WhtPermuted: return "wht_permuted";
    case Rotation::Eigen: return "eigen";
    }
    return "none";
}

std::optional<Rotation> rotationFromName(std::string_view name)
{
    for (auto r : {Rotation::None, Rotation::Wht, Rotation::WhtPermuted, Rotation::Eigen})
        if (rotationName(r) == name)
            return r;
    return std::nullopt;
}

std::string_view quantizerName(QuantizerKind q)
{
    switch (q) {
    case QuantizerKind::LloydBeta: return "lloyd_beta";
    case QuantizerKind::LloydGauss: return "lloyd_gauss";
    case QuantizerKind::LloydEmpirical: return "lloyd_empirical";
    case QuantizerKind::Uniform: return "uniform";
    case QuantizerKind::Spectral: return "spectral";
    }
    return "lloyd_beta";
}

std::optional<QuantizerKind> quantizerFromName(std::string_view name)
{
    for (auto q : {QuantizerKind::LloydBeta, QuantizerKind::LloydGauss, QuantizerKind::LloydEmpirical,
                   QuantizerKind::Uniform, QuantizerKind::Spectral})
        if (quantizerName(q) == name)
            return q;
    return std::nullopt;
}

namespace {

template <class E, std::size_t N>
std::optional<E> fromName(std::string_view name, const std::pair<E, const char*> (&table)[N])
{
    for (const auto& [value, text] : table)
        if (name == text)
            return value;
    return std::nullopt;
}

template <class E, std::size_t N>
std::string_view toName(E value, const std::pair<E, const char*> (&table)[N])
{
    for (const auto& [v, text] : table)
        if (v == value)
            return text;
    return table[0].second;
}

constexpr std::pair<Allocation, const char*> kAllocations[] = {{Allocation::WaterFilling, "water_filling"},
                                                                {Allocation::Uniform, "uniform"}};
constexpr std::pair<DeffRule, const char*> kDeffRules[] = {{DeffRule::Gap, "gap"},
                                                            {DeffRule::Participation, "participation"}};
constexpr std::pair<HeadqControl, const char*> kControls[] = {
    {HeadqControl::None, "none"}, {HeadqControl::WrongSign, "wrong_sign"}, {HeadqControl::RandomBasis, "random_basis"}};
constexpr std::pair<TokenPolicy, const char*> kTokenPolicies[] = {{TokenPolicy::Uniform, "uniform"},
                                                                  {TokenPolicy::A2, "a2"}};

} // namespace

std::string_view allocationName(Allocation a) { return toName(a, kAllocations); }
std::optional<Allocation> allocationFromName(std::string_view name) { return fromName(name, kAllocations); }
std::string_view deffRuleName(DeffRule r) { return toName(r, kDeffRules); }
std::optional<DeffRule> deffRuleFromName(std::string_view name) { return fromName(name, kDeffRules); }
std::string_view headqControlName(HeadqControl c) { return toName(c, kControls); }
std::optional<HeadqControl> headqControlFromName(std::string_view name) { return fromName(name, kControls); }
std::string_view tokenPolicyName(TokenPolicy p) { return toName(p, kTokenPolicies); }
std::optional<TokenPolicy> tokenPolicyFromName(std::string_view name) { return fromName(name, kTokenPolicies); }

std::string_view residualName(ResidualKind r)
{
    switch (r) {
    case ResidualKind::None: return "none";
    case ResidualKind::Qjl: return "qjl";
    case ResidualKind::HeadQ: return "headq";
    }
    return "none";
}

std::optional<ResidualKind> residualFromName(std::string_view name)
{
    for (auto r : {ResidualKind::None, ResidualKind::Qjl, ResidualKind::HeadQ})
        if (residualName(r) == name)
            return r;
    return std::nullopt;
}

std::string_view qjlReconstructionName(QjlReconstruction r)
{
    return r == QjlReconstruction::Mse ? "mse" : "unbiased";
}

std::optional<QjlReconstruction> qjlReconstructionFromName(std::string_view name)
{
    for (auto r : {QjlReconstruction::Unbiased, QjlReconstruction::Mse})
        if (qjlReconstructionName(r) == name)
            return r;
    return std::nullopt;
}

std::string_view qjlSketchName(QjlSketchKind k)
{
    return k == QjlSketchKind::Orthogonal ? "orthogonal" : "gaussian";
}

std::optional<QjlSketchKind> qjlSketchFromName(std::string_view name)
{
    for (auto k : {QjlSketchKind::Gaussian, QjlSketchKind::Orthogonal})
        if (qjlSketchName(k) == name)
            return k;
    return std::nullopt;
}

std::string BitsRule::text() const
{
    if (!relative)
        return std::to_string(value);
    if (value == 0)
        return "n";
    return value > 0 ? "n+" + std::to_string(value) : "n-" + std::to_string(-value);
}

std::optional<BitsRule> BitsRule::parse(std::string_view text)
{
    auto parseInt = [](std::string_view s, int& out) {
        const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
        return ec == std::errc() && ptr == s.data() + s.size();
    };
    if (text == "n")
        return BitsRule{true, 0};
    if (text.size() > 2 && text[0] == 'n' && (text[1] == '-' || text[1] == '+')) {
        int v = 0;
        if (!parseInt(text.substr(2), v))
            return std::nullopt;
        return BitsRule{true, text[1] == '-' ? -v : v};
    }
    int v = 0;
    if (!parseInt(text, v))
        return std::nullopt;
    return BitsRule{false, v};
}

namespace {

PathConfig lloyd(Rotation rotation, int offset, bool qjl)
{
    PathConfig p;
    p.rotation = rotation;
    p.quantizer = QuantizerKind::LloydBeta;
    p.bits = BitsRule{true, offset};
    p.residual = qjl ? ResidualKind::Qjl : ResidualKind::None;
    return p;
}

SchemeConfig make(std::string name, std::string description, PathConfig k, PathConfig v)
{
    return SchemeConfig{std::move(name), std::move(description), k, v, true};
}

std::vector<SchemeConfig> buildNamed()
{
    const auto none = Rotation::None, wht = Rotation::Wht;
    std::vector<SchemeConfig> s;
    s.push_back(make("KV", "Paper A: n-bit Lloyd-Max on K and V, no rotation, no sketch.", lloyd(none, 0, false),
                     lloyd(none, 0, false)));
    s.push_back(make("KQV", "Paper A: WHT + n-bit Lloyd-Max on K; WHT + (n-1)-bit Lloyd-Max + 1-bit QJL on V.",
                     lloyd(wht, 0, false), lloyd(wht, -1, true)));
    s.push_back(make("QKQV", "Paper A: WHT + (n-1)-bit Lloyd-Max + 1-bit QJL on both K and V.", lloyd(wht, -1, true),
                     lloyd(wht, -1, true)));
    struct Variant {
        const char* suffix;
        bool qjlK, qjlV;
    };
    const Variant variants[] = {{"KV", false, false}, {"QKV", true, false}, {"KQV", false, true}, {"QKQV", true, true}};
    for (const char* family : {"Plain", "TQ"}) {
        const bool rotated = std::string_view(family) == "TQ";
        for (const auto& v : variants) {
            std::string description = std::string("Paper B: ") + (rotated ? "WHT + " : "no rotation, ")
                                      + "Lloyd-Max; QJL on " + (v.qjlK && v.qjlV ? "K and V" : v.qjlK ? "K" : v.qjlV ? "V" : "neither")
                                      + " (a QJL path spends n-1 scalar bits + 1 sketch bit).";
            s.push_back(make(std::string(family) + "-" + v.suffix, description,
                             lloyd(rotated ? wht : none, v.qjlK ? -1 : 0, v.qjlK),
                             lloyd(rotated ? wht : none, v.qjlV ? -1 : 0, v.qjlV)));
        }
    }
    PathConfig kiviK;
    kiviK.quantizer = QuantizerKind::Uniform;
    kiviK.axis = UniformAxis::PerChannel;
    kiviK.groupSize = 32;
    PathConfig kiviV = kiviK;
    kiviV.axis = UniformAxis::PerToken;
    s.push_back(make("KIVI", "KIVI baseline: n-bit min-max integers, per-channel groups of 32 tokens for K, "
                             "per-token groups of 32 channels for V.",
                     kiviK, kiviV));
    PathConfig kiviA2 = kiviV;
    kiviA2.tokenPolicy = TokenPolicy::A2;
    s.push_back(make("KIVI-A2", "Paper C: KIVI keys; KIVI values with the A^2-weighted token policy (more bits for the "
                                "tokens calibration queries attend to most, same total).",
                     kiviK, kiviA2));

    PathConfig sq;
    sq.rotation = Rotation::Eigen;
    sq.quantizer = QuantizerKind::Spectral;
    PathConfig squ = sq;
    squ.allocation = Allocation::Uniform;
    PathConfig sqQjl = sq;
    sqQjl.residual = ResidualKind::Qjl;
    s.push_back(make("SQ-KV", "Paper B: SpectralQuant: calibrated eigenbasis per cache, water-filled bits over the d_eff "
                              "leading coordinates, a tail floor for the rest; K and V calibrated separately.",
                     sq, sq));
    s.push_back(make("SQU-KV", "Paper B: SpectralQuant with the same bits on every leading coordinate.", squ, squ));
    s.push_back(make("SQ-QKV", "Paper B: SpectralQuant, plus a selective QJL sketch of the key residual on the d_eff "
                               "leading coordinates (exact dot product on the tail).",
                     sqQjl, sq));

    PathConfig headq = kiviK;
    headq.residual = ResidualKind::HeadQ;
    s.push_back(make("HeadQ", "Paper C: KIVI keys plus a rank-4, 8-bit side code of the key residual in the "
                              "calibration queries' PCA basis, applied as a logit correction; KIVI values.",
                     headq, kiviV));
    s.push_back(make("HeadQ-A2", "Paper C: HeadQ keys with A^2-weighted KIVI values.", headq, kiviA2));
    PathConfig wrongSign = headq;
    wrongSign.headqControl = HeadqControl::WrongSign;
    s.push_back(make("HeadQ-wrong-sign", "Paper C control: HeadQ with the correction subtracted.", wrongSign, kiviV));
    PathConfig randomBasis = headq;
    randomBasis.headqControl = HeadqControl::RandomBasis;
    s.push_back(make("HeadQ-random-basis", "Paper C control: HeadQ with a random orthonormal basis of the same rank.",
                     randomBasis, kiviV));
    return s;
}

} // namespace

const std::vector<SchemeConfig>& namedSchemes()
{
    static const std::vector<SchemeConfig> schemes = [] {
        std::vector<SchemeConfig> all = buildNamed();
        for (const auto& e : schemeExtensions())
            all.insert(all.end(), e.schemes.begin(), e.schemes.end());
        return all;
    }();
    return schemes;
}

std::optional<SchemeConfig> findScheme(std::string_view name)
{
    for (const auto& s : namedSchemes())
        if (s.name == name)
            return s;
    return std::nullopt;
}

std::string schemeNames()
{
    std::string names;
    for (const auto& s : namedSchemes())
        names += (names.empty() ? "" : ", ") + s.name;
    return names;
}

namespace {

Status validatePath(const PathConfig& p, const std::vector<int>& budgets, int d, const std::string& field)
{
    for (int n : budgets) {
        const int b = p.bits.at(n);
        if (b < 1 || b > 8)
            return Error{field + ".bits", "'" + p.bits.text() + "' gives " + std::to_string(b) + " bits at budget n = "
                                              + std::to_string(n) + "; a path needs 1..8 bits"};
    }
    if (!p.codec.empty()) {
        const CodecKind* kind = findCodec(p.codec);
        if (!kind)
            return Error{field + ".codec", "unknown codec '" + p.codec + "'; registered: " + codecNames()};
        if (p.tokenPolicy != TokenPolicy::Uniform)
            return Error{field + ".token_policy", "a registered codec stores every token at the path's bits"};
        if (kind->validate)
            for (int n : budgets)
                if (auto s = kind->validate(p, n, d, field); !s)
                    return s;
        return Ok{};
    }
    if (p.residual == ResidualKind::Qjl && (p.qjlDim < 0 || p.qjlDim > 16 * d))
        return Error{field + ".qjl_dim", "must be in [0, 16 d] = [0, " + std::to_string(16 * d) + "] (0 means m = d), got "
                                             + std::to_string(p.qjlDim)};
    if (p.quantizer == QuantizerKind::Uniform) {
        if (p.groupSize < 1 || p.groupSize > 1 << 20)
            return Error{field + ".group_size", "must be in [1, 1048576], got " + std::to_string(p.groupSize)};
        if (p.window < 0)
            return Error{field + ".window", "must be >= 0, got " + std::to_string(p.window)};
    }
    const bool spectral = p.quantizer == QuantizerKind::Spectral;
    if (spectral != (p.rotation == Rotation::Eigen))
        return Error{field + (spectral ? ".rotation" : ".quantizer"),
                     "the eigen rotation and the spectral quantizer go together (SpectralQuant)"};
    if (spectral) {
        if (p.tailBits < 0 || p.tailBits > 8)
            return Error{field + ".tail_bits", "must be in [0, 8], got " + std::to_string(p.tailBits)};
        if (!(p.gapThreshold >= 1.0) || !std::isfinite(p.gapThreshold))
            return Error{field + ".gap_threshold", "must be a finite ratio >= 1"};
        if (p.residual == ResidualKind::HeadQ)
            return Error{field + ".residual", "HeadQ needs a KIVI or Lloyd base, not the spectral quantizer"};
    }
    if (p.residual == ResidualKind::HeadQ) {
        if (p.headqRank < 1 || p.headqRank > d)
            return Error{field + ".headq_rank", "must be in [1, d] = [1, " + std::to_string(d) + "], got "
                                                    + std::to_string(p.headqRank)};
        if (p.headqBits < 1 || p.headqBits > 8)
            return Error{field + ".headq_bits", "must be in [1, 8], got " + std::to_string(p.headqBits)};
        if (p.rotation != Rotation::None)
            return Error{field + ".rotation", "HeadQ corrects the key residual in the original basis: use no rotation"};
    }
    if (p.tokenPolicy == TokenPolicy::A2) {
        if (p.quantizer == QuantizerKind::Spectral || p.quantizer == QuantizerKind::LloydEmpirical
            || p.residual != ResidualKind::None)
            return Error{field + ".token_policy",
                         "the A^2 token policy needs a plain KIVI, lloyd_beta or lloyd_gauss value path"};
        if (p.quantizer == QuantizerKind::Uniform && p.axis != UniformAxis::PerToken)
            return Error{field + ".token_policy", "the A^2 token policy needs per-token groups (axis per_token)"};
    }
    return Ok{};
}

} // namespace

Status validateScheme(const SchemeConfig& scheme, const std::vector<int>& budgets, int d, const std::string& field)
{
    if (scheme.name.empty())
        return Error{field + ".name", "a scheme needs a name"};
    if (auto s = validatePath(scheme.key, budgets, d, field + ".k"); !s)
        return s;
    if (auto s = validatePath(scheme.value, budgets, d, field + ".v"); !s)
        return s;
    if (scheme.value.residual == ResidualKind::HeadQ)
        return Error{field + ".v.residual", "HeadQ corrects scores, so it belongs on the key path"};
    if (scheme.key.tokenPolicy == TokenPolicy::A2)
        return Error{field + ".k.token_policy", "the A^2 token policy is for value paths"};
    return Ok{};
}

bool needsCalibration(const SchemeConfig& scheme)
{
    auto needs = [](const PathConfig& p) {
        if (!p.codec.empty()) {
            const CodecKind* kind = findCodec(p.codec);
            return kind && kind->needsCalibration;
        }
        return p.quantizer == QuantizerKind::LloydEmpirical || p.rotation == Rotation::Eigen
               || p.residual == ResidualKind::HeadQ || p.tokenPolicy == TokenPolicy::A2;
    };
    return needs(scheme.key) || needs(scheme.value);
}

} // namespace kvlens
