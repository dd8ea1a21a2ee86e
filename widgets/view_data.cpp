// SPDX-License-Identifier: GPL-3.0-or-later
// Derivation of view data from a result set (meant for worker threads).
#include "widgets/view_data.h"

namespace kvlens::widgets {

ViewData makeViewData(std::shared_ptr<const ResultSet> results, bool withComparisons, const CancelToken& cancel)
{
    ViewData data;
    data.partial = !withComparisons;
    if (!results)
        return data;
    data.figures = std::make_shared<const FigureData>(buildFigureData(*results));
    data.rateDistortionKl = std::make_shared<const RateDistortion>(rateDistortion(*results, DamageMetric::MeanKl));
    data.rateDistortionOutput = std::make_shared<const RateDistortion>(rateDistortion(*results, DamageMetric::OutputError));
    if (results->spec.regime == "model") {
        data.modelMap = std::make_shared<const std::vector<MapValue>>(kvlens::modelMap(*results));
        data.sensitivity = std::make_shared<const std::vector<SensitivityRow>>(kvSensitivity(*results));
    }
    if (withComparisons) {
        data.comparisons = std::make_shared<const std::vector<stats::ComparisonRow>>(stats::compareSchemes(*results, cancel));
        cancel.check();
        data.proxies = std::make_shared<const std::vector<stats::ProxyRow>>(stats::proxyStudy(*results));
    }
    data.results = std::move(results);
    return data;
}

QString schemeLabel(const ResultSet* results, int index)
{
    if (!results || index < 0 || index >= static_cast<int>(results->schemes.size()))
        return QStringLiteral("?");
    return QString::fromStdString(results->schemes[static_cast<std::size_t>(index)].name);
}

} // namespace kvlens::widgets
