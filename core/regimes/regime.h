// SPDX-License-Identifier: GPL-3.0-or-later
// Data regimes: generators of keys, values, queries and calibration sets with described parameters.
#pragma once

#include "core/common/result.h"
#include "core/common/types.h"
#include "core/rng/random_matrix.h" // randomOrthonormal, for the regimes
#include "core/rng/rng.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kvlens {

/// Describes one regime parameter, so that validation, the spec JSON and the GUI's
/// control widgets all come from the same table (a new regime needs no widget code).
struct ParamDesc {
    enum class Kind { Real, Integer, Choice, Text };
    std::string key;          ///< JSON key, e.g. "nu"
    std::string label;        ///< GUI label, e.g. "degrees of freedom nu"
    std::string tooltip;      ///< one sentence on what it does
    Kind kind = Kind::Real;
    double defaultValue = 0.0;
    double minValue = 0.0;
    double maxValue = 0.0;
    bool logScale = false;    ///< spans decades: a log slider and log sweep axes suit it
    std::vector<std::string> choices; ///< for Choice
    std::string defaultText;  ///< for Choice and Text
};

using ParamValue = std::variant<double, std::string>;
using RegimeParams = std::map<std::string, ParamValue, std::less<>>;

/// Sizes of one draw. `calibration` = 0 skips the calibration sets.
struct DataShape {
    int d = 128;             ///< head dimension
    int tokens = 1024;       ///< N keys and values
    int queries = 64;        ///< Q queries
    int calibration = 0;     ///< rows of each calibration set (keys, values, queries)
};

/// One draw of a regime: evaluation tensors and a separate calibration set from the same law.
/// All matrices are token-major (rows = vectors), d columns.
struct Dataset {
    RowMatrixXf keys, values, queries;
    RowMatrixXf calibrationKeys, calibrationValues, calibrationQueries;
    std::string note; ///< anything the regime wants shown (e.g. which outlier channels)
    /// Causal attention: the sequence position of each key and query row. When set, query i
    /// attends only keys with keyPositions[j] <= queryPositions[i]; empty: every key.
    std::vector<int> keyPositions, queryPositions;
    bool causal() const { return !keyPositions.empty(); }
};

/// A generator of data under a named law (design section 3).
class Regime {
public:
    virtual ~Regime() = default;

    virtual std::string_view name() const = 0;
    virtual std::string_view description() const = 0;
    virtual const std::vector<ParamDesc>& params() const = 0;

    /// Every parameter at its default.
    RegimeParams defaults() const;

    /// Fills missing parameters with defaults and checks every value against its
    /// description (range, integer, choice) and the regime's own rules; unknown keys are
    /// rejected. Errors name the field as "regime.<key>" with the allowed range.
    /// With `checkInputs` false, a seed-independent regime skips the rules that read its inputs (an
    /// imported file's headers): for reading back a finished run whose file is elsewhere.
    Result<RegimeParams> normalize(const RegimeParams& params, const DataShape& shape, bool checkInputs = true) const;

    /// Draws a dataset. `params` must come from normalize(). Deterministic in (engine, seed).
    virtual Result<Dataset> generate(const RegimeParams& params, const DataShape& shape, EngineKind engine,
                                     std::uint64_t seed) const = 0;

    /// True when generate() ignores the engine and seed (data read from a file): the runner then
    /// reads it once per grid point for the whole run and hashes its bytes into the run's identity.
    virtual bool seedIndependent() const { return false; }

    /// True when the data are a transformer's (layer, head) cells, read from a model dump: the
    /// parameters name the cell (`layer`, `head`), a spec may give `layers` and `heads` as grid axes,
    /// allocation files are checked against the dump's layers, and a run over it is mapped by cell.
    virtual bool hasModelCells() const { return false; }

    /// Bytes the regime reads from outside before the first draw (imported slices as float32), for
    /// the memory estimate; `params` from normalize(). Default: none.
    virtual double inputBytes(const RegimeParams& params, const DataShape& shape) const
    {
        (void)params;
        (void)shape;
        return 0.0;
    }

protected:
    /// Rules beyond per-parameter ranges (e.g. rank <= d). Default: none.
    virtual Status checkRules(const RegimeParams& params, const DataShape& shape) const;
};

/// Every built-in regime, in display order.
const std::vector<const Regime*>& allRegimes();
/// The regime called `name`, or nullptr.
const Regime* findRegime(std::string_view name);
/// Comma-separated regime names, for error messages.
std::string regimeNames();

/// Reads a numeric parameter of a normalized parameter set.
double paramNumber(const RegimeParams& params, std::string_view key);
/// Reads a text or choice parameter of a normalized parameter set.
const std::string& paramText(const RegimeParams& params, std::string_view key);

/// Fills `m` (rows x cols) with N(0, 1) draws from `rng`, row by row.
void fillGaussian(RowMatrixXf& m, Eigen::Index rows, Eigen::Index cols, Rng& rng);


} // namespace kvlens
