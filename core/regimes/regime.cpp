// SPDX-License-Identifier: GPL-3.0-or-later
// Parameter normalization shared by all regimes, and the registry.
#include "core/regimes/regime.h"

#include "core/common/format.h"
#include "core/io/json_text.h"
#include "core/io/tensor_file.h"
#include "core/regimes/builtin.h"

#include <Eigen/QR>

#include <algorithm>
#include <cassert>
#include <cmath>

namespace kvlens {

RegimeParams Regime::defaults() const
{
    RegimeParams out;
    for (const auto& p : params()) {
        if (p.kind == ParamDesc::Kind::Choice || p.kind == ParamDesc::Kind::Text)
            out[p.key] = p.defaultText;
        else
            out[p.key] = p.defaultValue;
    }
    return out;
}

Status Regime::checkRules(const RegimeParams&, const DataShape&) const
{
    return Ok{};
}

Result<RegimeParams> Regime::normalize(const RegimeParams& given, const DataShape& shape, bool checkInputs) const
{
    RegimeParams out = defaults();
    for (const auto& [key, value] : given) {
        const auto& descs = params();
        const auto it = std::find_if(descs.begin(), descs.end(), [&key = key](const ParamDesc& p) { return p.key == key; });
        if (it == descs.end()) {
            std::string known;
            for (const auto& p : descs)
                known += (known.empty() ? "" : ", ") + p.key;
            return Error{"regime." + key, "unknown parameter of regime '" + std::string(name()) + "'"
                                              + (known.empty() ? " (it has none)" : " (known: " + known + ")")};
        }
        const ParamDesc& p = *it;
        const std::string field = "regime." + key;
        if (p.kind == ParamDesc::Kind::Choice || p.kind == ParamDesc::Kind::Text) {
            const auto* text = std::get_if<std::string>(&value);
            if (!text)
                return Error{field, "must be a string"};
            // A path or name that JSON cannot hold (invalid UTF-8, from a folder name) would make
            // the run fail when it writes spec.json: refused now, before anything is computed.
            if (!io::isValidUtf8(*text))
                return Error{field, "is not valid UTF-8 (" + io::quoteName(*text)
                                        + "); spec.json could not record it: rename the file or folder"};
            if (p.kind == ParamDesc::Kind::Choice
                && std::find(p.choices.begin(), p.choices.end(), *text) == p.choices.end()) {
                std::string allowed;
                for (const auto& c : p.choices)
                    allowed += (allowed.empty() ? "" : ", ") + c;
                return Error{field, "must be one of " + allowed + ", got '" + *text + "'"};
            }
            out[key] = *text;
            continue;
        }
        const auto* number = std::get_if<double>(&value);
        if (!number)
            return Error{field, "must be a number"};
        const double v = *number;
        const std::string range = "[" + formatNumber(p.minValue) + ", " + formatNumber(p.maxValue) + "]";
        if (!std::isfinite(v) || v < p.minValue || v > p.maxValue)
            return Error{field, "must be in " + range + ", got " + formatNumber(v)};
        if (p.kind == ParamDesc::Kind::Integer && v != std::floor(v))
            return Error{field, "must be an integer in " + range + ", got " + formatNumber(v)};
        out[key] = v;
    }
    if (!checkInputs && seedIndependent())
        return out; // the inputs may live on another machine (kvlens merge)
    if (auto rules = checkRules(out, shape); !rules)
        return rules.error();
    return out;
}

double paramNumber(const RegimeParams& params, std::string_view key)
{
    const auto it = params.find(key);
    assert(it != params.end() && std::holds_alternative<double>(it->second) && "paramNumber on a missing key");
    return std::get<double>(it->second);
}

const std::string& paramText(const RegimeParams& params, std::string_view key)
{
    const auto it = params.find(key);
    assert(it != params.end() && std::holds_alternative<std::string>(it->second) && "paramText on a missing key");
    return std::get<std::string>(it->second);
}

void fillGaussian(RowMatrixXf& m, Eigen::Index rows, Eigen::Index cols, Rng& rng)
{
    m.resize(rows, cols);
    rng.fillNormal(m.data(), static_cast<std::size_t>(m.size()));
}

const std::vector<const Regime*>& allRegimes()
{
    static const std::vector<const Regime*> regimes = builtinRegimes();
    return regimes;
}

const Regime* findRegime(std::string_view name)
{
    for (const Regime* r : allRegimes())
        if (r->name() == name)
            return r;
    return nullptr;
}

std::string regimeNames()
{
    std::string names;
    for (const Regime* r : allRegimes())
        names += (names.empty() ? "" : ", ") + std::string(r->name());
    return names;
}

} // namespace kvlens
