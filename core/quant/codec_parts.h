// SPDX-License-Identifier: GPL-3.0-or-later
// The parts a codec is composed of (transforms, quantizers, residual stages, token policies): the
// registry, their options, and the interfaces a planned part implements. A part is one file that
// returns a PartKind, plus one line in codec_registry.cpp; nothing else names it.
#pragma once

#include "core/common/result.h"
#include "core/common/types.h"
#include "core/quant/codec_primitives.h"
#include "core/quant/scheme.h"
#include "core/rng/rng.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens {

struct SpectralAnalysis;

/// Which cache a path stores; selects the random streams so K and V get independent signs
/// and sketches, identical for every scheme and budget of a seed (paired comparisons).
enum class PathSite { Keys, Values };

/// What a plan may be calibrated on. Calibration sets are separate draws from the data being
/// scored (a scheme never calibrates on what it is scored on).
struct PlanInputs {
    const RowMatrixXf* calibration = nullptr;        ///< rows of this path's site (keys or values)
    const RowMatrixXf* calibrationQueries = nullptr; ///< HeadQ's query basis, A^2's attention
    /// Eigen-decompositions reused by every scheme and budget of a trial group (may be null):
    /// [0] this site's calibration set, [1] the calibration queries.
    std::shared_ptr<const SpectralAnalysis>* spectrumCache = nullptr;
};

/// What encoding a path produces.
struct PathResult {
    RowMatrixXf reconstruction; ///< n x d, in the original basis, residual reconstruction included
    RowMatrixXf scores;         ///< nq x n estimated q.k / sqrt(d) (when queries were given)
    RowMatrixXf baseScores;     ///< nq x n without the residual's correction (only with a residual)
    int saturatedNorms = 0;     ///< stored scalars that hit their format's ceiling
};

/// SpectralQuant's effective dimension on one path (trial results report it).
struct PathDimension {
    bool reported = false;
    int used = 0;
    double participationRatio = 0.0;
    int gapRule = 0;
    bool byGap = false;
};

/// The role a part plays in a codec.
enum class PartRole { Transform, Quantizer, Residual, TokenPolicy };
std::string_view partRoleName(PartRole role); ///< "transform", "quantizer", "residual", "token policy"

/// One option of a part kind: its type, range and default, as specs and the window show them.
struct OptionDesc {
    enum class Type { Integer, Real, Choice };
    std::string name;
    Type type = Type::Integer;
    double lo = 0.0, hi = 0.0;          ///< Integer and Real
    std::vector<std::string> choices;   ///< Choice
    OptionValue fallback;               ///< the default
    std::string description;            ///< one sentence
};

/// Everything a part is planned from. Parts of one path are planned in order (transforms,
/// quantizer, residuals, token policy) and may read what the earlier ones left here.
struct PlanContext {
    const PathConfig& config;
    int budget = 0;
    int bits = 0;                      ///< config.bits at the budget
    int d = 0;                         ///< original dimension
    int dim = 0;                       ///< the stored basis's dimension after the transforms planned so far
    PathSite site = PathSite::Keys;
    const PlanInputs& inputs;
    EngineKind engine = EngineKind::Mt19937_64;
    std::uint64_t seed = 0;
    float scoreScale = 1.0f;           ///< 1/sqrt(d)
    // Shared between the parts of one path.
    std::shared_ptr<const SpectralAnalysis> spectrum; ///< the eigen transform's analysis of the calibration set
    int leadDims = 0;                  ///< SpectralQuant's d_eff: the QJL sketch acts on these coordinates
    /// The calibration set in the stored basis (after the transforms so far), computed on demand.
    std::function<const RowMatrixXf*()> storedCalibration;
};

/// A planned transform: an invertible map of rows into the stored basis.
class TransformPlan {
public:
    virtual ~TransformPlan() = default;
    virtual int outDim() const = 0;
    /// x (n x inDim) into the stored basis (n x outDim); queries go through the same map.
    virtual void forward(const Eigen::Ref<const RowMatrixXf>& x, RowMatrixXf& out) const = 0;
    /// Back (n x outDim -> n x inDim).
    virtual void inverse(const Eigen::Ref<const RowMatrixXf>& y, RowMatrixXf& out) const = 0;
    /// A plain signed Walsh-Hadamard rotation offers its signs, so the engine can run it on a
    /// device's rotate primitive or fuse it with the quantizer.
    virtual const std::vector<float>* whtSigns() const { return nullptr; }
    /// Storage the transform adds, in bits, for `tokens` vectors (per-channel statistics).
    virtual double bits(int tokens) const { (void)tokens; return 0.0; }
    /// A coordinate permutation applied first (stored i = original permutation[i]), or null.
    virtual const std::vector<int>* permutation() const { return nullptr; }
};

/// A planned quantizer: rows of the stored basis to codes and back.
class QuantizerPlan {
public:
    virtual ~QuantizerPlan() = default;
    /// Quantizes and dequantizes xr (n x dim, stored basis) at `bits` (the path's bits unless a
    /// token policy varies them by token); adds to `saturated` the stored scalars that hit their
    /// format's ceiling. Host matrices; a device runs codebook() through its primitives instead.
    virtual void roundTrip(const Eigen::Ref<const RowMatrixXf>& xr, int bits, RowMatrixXf& xHat, int& saturated) const = 0;
    /// Device path: a quantizer that the primitives offer (a norm + codebook) returns its codebook.
    virtual const Codebook* codebook() const { return nullptr; }
    virtual ScalarFormat scalarFormat() const { return ScalarFormat::Fp16; }
    /// Storage in bits of `tokens` vectors at `meanBits` bits a coordinate, every overhead included
    /// (group scalars, norms, windows, outliers).
    virtual double bits(int tokens, int dim, double meanBits) const = 0;
    /// Tokens encoded together: statistics of a group of this many consecutive tokens (and of
    /// calibration data) decide its codes. 1: every token alone.
    virtual int causalGroup() const { return 1; }
    /// Relative distortion D of the codebook, for the predicted score-error variance (Lloyd only).
    virtual std::optional<double> relativeDistortion() const { return std::nullopt; }
    /// Decisions within `margin` of a boundary (norm midpoints, codebook thresholds).
    virtual int boundaryDecisions(const RowMatrixXf& stored, double margin) const { (void)stored; (void)margin; return 0; }
    virtual PathDimension dimension() const { return {}; }
    /// Bits of each stored coordinate where the quantizer allocates them per coordinate
    /// (SpectralQuant's water-filling); empty otherwise.
    virtual std::vector<int> coordinateBits() const { return {}; }
};

/// What a residual stage reads and corrects, on the engine's primitives (a device's, or the
/// CPU's when the stage does not run there: see ResidualPlan::runsOn).
struct ResidualIO {
    const Eigen::Ref<const RowMatrixXf>& original; ///< x, n x d (host)
    Mat stored;                                     ///< x in the stored basis, n x dim
    Mat& xHat;                                      ///< the reconstruction so far (stored basis), corrected in place
    Mat queries;                                    ///< queries in the stored basis (null for value paths)
    Mat* scores;                                    ///< nq x n, corrected in place (null for value paths)
    Mat* baseScores;                                ///< set to a copy of the scores before the first correction
    int& saturated;
    float scoreScale;
    CodecPrimitives& prims;
};

/// A planned residual stage.
class ResidualPlan {
public:
    virtual ~ResidualPlan() = default;
    /// True when every primitive the stage uses is offered by `prims` (else it runs on the CPU's).
    virtual bool runsOn(const CodecPrimitives& prims) const = 0;
    virtual void apply(ResidualIO& io) const = 0;
    virtual double bitsPerVector() const = 0;
    /// Columns of the stage's projection of a row (QJL's sketch rows m, HeadQ's rank).
    virtual int projectionColumns() const = 0;
    /// For the predicted score-error variance: the factor replacing 1/dim in D |q|^2 |k|^2 / d / dim.
    virtual std::optional<double> scoreVarianceFactor(int dim) const { (void)dim; return std::nullopt; }
    /// Decisions within `margin` of a boundary (QJL sign zero crossings), given the quantizer's output.
    virtual int boundaryDecisions(const RowMatrixXf& stored, const RowMatrixXf& xHat, double margin) const
    {
        (void)stored; (void)xHat; (void)margin;
        return 0;
    }
};

/// What a token policy may look at: the cache being written and the calibration queries.
struct TokenContext {
    const RowMatrixXf& keys;
    const RowMatrixXf& values;
    const RowMatrixXf* calibrationQueries = nullptr; ///< already multiplied by the score scale
    float scoreScale = 1.0f;
};

/// A planned token policy: per-token bit widths (empty: every token at the path's bits).
class TokenPolicyPlan {
public:
    virtual ~TokenPolicyPlan() = default;
    virtual std::vector<int> tokenBits(const TokenContext& context, int bits) const = 0;
    virtual int causalGroup() const { return 1; }
};

/// A registered part kind.
struct PartKind {
    std::string name;
    PartRole role = PartRole::Quantizer;
    std::string description;
    std::vector<OptionDesc> options;
    /// The path needs a calibration set of its site (or calibration queries) with this part.
    std::function<bool(const CodecPart&)> needsCalibration;
    /// Checks of the part in its path beyond its options' ranges (which the registry checks);
    /// `field` names the part ("schemes[0].k.quantizer"). May be empty.
    std::function<Status(const CodecPart&, const PathConfig&, int budget, int d, const std::string& field)> validate;
    /// Plans the part (random parts from the seed's named streams, calibration). Exactly one of
    /// these is set, by role.
    std::function<std::shared_ptr<const TransformPlan>(const CodecPart&, PlanContext&)> planTransform;
    std::function<std::shared_ptr<const QuantizerPlan>(const CodecPart&, PlanContext&)> planQuantizer;
    std::function<std::shared_ptr<const ResidualPlan>(const CodecPart&, PlanContext&)> planResidual;
    std::function<std::shared_ptr<const TokenPolicyPlan>(const CodecPart&, PlanContext&)> planTokenPolicy;
    /// Columns of the part's projection of each stored row (QJL's m sketch rows, HeadQ's rank r),
    /// for memory estimates and FLOP floors; empty: none.
    std::function<int(const CodecPart&, int d)> projectionColumns;
    /// The one cache the part belongs on (HeadQ corrects scores: keys; A^2 spreads value bits:
    /// values), with the reason errors give; empty: either.
    std::optional<PathSite> site;
    std::string siteReason;
    /// The quantizer stores fixed widths whatever the budget (fp16, llama.cpp's types): the path's
    /// bits rule is not checked against 1..8.
    bool fixedWidth = false;
    /// Named schemes this part brings (registered with it).
    std::vector<SchemeConfig> schemes;
};

/// Every registered part kind, in registration order (codec_registry.cpp).
const std::vector<PartKind>& partKinds();
/// The part kind of `role` called `name`, or null. Names are unique within a role ("uniform" is
/// both a quantizer and a token policy).
const PartKind* findPart(std::string_view name, PartRole role);
/// Comma-separated names of the kinds of one role, for error messages.
std::string partNames(PartRole role);

/// Fills a part's missing options with their defaults and checks every option against its
/// description (unknown names, types, ranges, choices). `field` names the part.
Status normalizePart(CodecPart& part, PartRole role, const std::string& field);

} // namespace kvlens
