// SPDX-License-Identifier: GPL-3.0-or-later
// The extension point of the quantization layer: a path codec registered by name, and the
// named schemes built on it. A new scheme from the literature is one file that returns a
// SchemeExtension, plus one line in extensions.cpp; nothing else switches on it.
#pragma once

#include "core/common/result.h"
#include "core/common/types.h"
#include "core/quant/scheme.h"
#include "core/rng/rng.h"

#include <cstdint>
#include <functional>
#include <memory>
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
    const RowMatrixXf* calibrationQueries = nullptr; ///< HeadQ's query basis
    /// Eigen-decompositions reused by every scheme and budget of a trial group (may be null):
    /// [0] this site's calibration set, [1] the calibration queries.
    std::shared_ptr<const SpectralAnalysis>* spectrumCache = nullptr;
};

/// What encoding a path produces.
struct PathResult {
    RowMatrixXf reconstruction; ///< n x d, in the original basis, residual reconstruction included
    RowMatrixXf scores;         ///< nq x n estimated q.k / sqrt(d) (when queries were given)
    RowMatrixXf baseScores;     ///< nq x n without the residual's correction (only with a residual)
    int saturatedNorms = 0;     ///< stored norms that hit the fp16 ceiling
};

/// A path's codec, resolved for one budget, seed and calibration set: it reports its own
/// storage and encodes. Immutable once planned (shared between threads).
class PathCodec {
public:
    virtual ~PathCodec() = default;
    /// Storage in bits per original coordinate for `tokens` vectors, every overhead included.
    virtual double bitsPerCoordinate(int tokens) const = 0;
    /// Quantizes and dequantizes x (n x d); with queries (nq x d), the scores q.k^ / sqrt(d)
    /// the cache would produce.
    virtual PathResult encode(const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries) const = 0;
};

/// What a codec is planned from.
struct CodecContext {
    const PathConfig& config;
    int budget = 0;
    int bits = 0; ///< config.bits at the budget
    int d = 0;
    PathSite site = PathSite::Keys;
    const PlanInputs& inputs;
    EngineKind engine = EngineKind::Mt19937_64;
    std::uint64_t seed = 0;
};

/// A registered codec: PathConfig::codec names it (and the JSON path's "codec" field).
struct CodecKind {
    std::string name;
    std::string description;
    bool needsCalibration = false; ///< the experiment draws a calibration set of the path's site
    /// Extra checks of a path using the codec (bits are already checked against 1..8); may be empty.
    std::function<Status(const PathConfig&, int budget, int d, const std::string& field)> validate;
    /// Bits per coordinate from the configuration alone (menus, previews, the spec's budget line).
    std::function<double(const PathConfig&, int budget, int d, int tokens)> previewBits;
    /// Plans the codec (calibration, codebooks, random parts from the seed's streams).
    std::function<std::shared_ptr<const PathCodec>(const CodecContext&)> plan;
};

/// One extension: its codec and the named schemes that use it.
struct SchemeExtension {
    CodecKind codec;
    std::vector<SchemeConfig> schemes; ///< builtin = true: written to JSON by name
};

/// Every registered extension, in registration order (extensions.cpp).
const std::vector<SchemeExtension>& schemeExtensions();
/// The registered codec called `name`, or null.
const CodecKind* findCodec(std::string_view name);
/// Comma-separated codec names, for error messages.
std::string codecNames();

} // namespace kvlens
