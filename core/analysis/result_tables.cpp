// SPDX-License-Identifier: GPL-3.0-or-later
// Result tables as CSV text.
#include "core/analysis/result_tables.h"

#include "core/io/csv.h"
#include "core/analysis/summary.h"

namespace kvlens {

namespace {

const std::string& schemeName(const ResultSet& r, int index)
{
    return r.schemes[static_cast<std::size_t>(index)].name;
}

} // namespace

std::vector<std::string> sweepColumns(const ExperimentSpec& spec)
{
    std::vector<std::string> columns;
    for (const SweepAxis* axis : spec.gridAxes())
        columns.push_back(axis->name());
    return columns;
}

void addSweepValues(CsvWriter& csv, const ExperimentSpec& spec, int point)
{
    for (double v : spec.pointValues(point))
        csv.add(v);
}

std::vector<std::string> withSweepColumns(const ExperimentSpec& spec, std::vector<std::string> before,
                                          const std::vector<std::string>& after)
{
    for (auto& c : sweepColumns(spec))
        before.push_back(std::move(c));
    before.insert(before.end(), after.begin(), after.end());
    return before;
}

std::string summaryCsv(const ResultSet& results)
{
    CsvWriter csv(withSweepColumns(results.spec, {"regime", "point"}, {"scheme", "budget", "bits_k", "bits_v", "bits_total", "trials", "queries",
                   "kl_mean", "kl_median", "kl_p99", "kl_max", "recall_mean", "argmax_shift_rate", "snr_k", "phi_k",
                   "snr_v", "phi_v", "snr_t", "phi_t", "rel_mse_k", "rel_mse_v", "fisher_mean", "a2_mean",
                   "score_err_var", "score_err_var_base", "score_err_var_pred", "log_mean_exp_score_err", "entropy_mean",
                   "saturated_norms"}));
    for (const SummaryRow& r : summarize(results)) {
        csv.add(results.spec.regime).add(r.point);
        addSweepValues(csv, results.spec, r.point);
        csv.add(schemeName(results, r.scheme)).add(r.budget);
        csv.add(r.bits.key).add(r.bits.value).add(r.bits.total()).add(r.trials).add(r.queries);
        csv.add(r.klMean).add(r.klMedian).add(r.klP99).add(r.klMax).add(r.recallMean).add(r.argmaxShiftRate);
        for (double v : r.sixD.values())
            csv.add(v);
        csv.add(r.relMseK).add(r.relMseV).add(r.fisherMean).add(r.a2Mean);
        csv.add(r.scoreErrorVar).add(r.scoreErrorVarBase).add(r.scoreErrorVarPredicted).add(r.logMeanExpScoreError);
        csv.add(r.meanEntropy);
        csv.add(r.saturatedNorms);
        csv.endRow();
    }
    return csv.text();
}

std::string trialsCsv(const ResultSet& results)
{
    CsvWriter csv(withSweepColumns(results.spec, {"point"}, {"scheme", "budget", "seed", "snr_k", "phi_k", "snr_v", "phi_v", "snr_t", "phi_t",
                   "rel_mse_k", "rel_mse_v", "raw_mse_k", "score_err_mean", "score_err_var", "score_err_var_base",
                   "score_err_var_pred", "log_mean_exp_score_err", "entropy_mean", "bits_k", "bits_v", "saturated_norms",
                   "deff_k", "deff_pr_k", "deff_gap_k", "deff_v", "deff_pr_v", "deff_gap_v",
                   "ms_key_path", "ms_value_path", "ms_attention", "ms_metrics"}));
    for (const TrialResult& t : results.trials) {
        csv.add(t.key.point);
        addSweepValues(csv, results.spec, t.key.point);
        csv.add(schemeName(results, t.key.scheme)).add(t.key.budget).add(static_cast<unsigned long long>(t.key.seed));
        for (double v : t.sixD.values())
            csv.add(v);
        csv.add(t.relMseK).add(t.relMseV).add(t.rawMseK).add(t.scoreErrorMean).add(t.scoreErrorVar)
            .add(t.scoreErrorVarBase).add(t.scoreErrorVarPredicted).add(t.logMeanExpScoreError).add(t.meanEntropy)
            .add(t.bits.key)
            .add(t.bits.value).add(t.saturatedNorms);
        for (const EffectiveDimension* e : {&t.deffK, &t.deffV}) {
            if (e->valid())
                csv.add(e->used).add(e->participationRatio).add(e->gapRule);
            else
                csv.add("").add("").add("");
        }
        csv.add(t.timings.keyPath).add(t.timings.valuePath).add(t.timings.attention).add(t.timings.metrics);
        csv.endRow();
    }
    return csv.text();
}

std::string queriesCsv(const ResultSet& results)
{
    CsvWriter csv(withSweepColumns(results.spec, {"point"},
                                   {"scheme", "budget", "seed", "query", "kl", "recall", "argmax_shift", "fisher",
                                    "a2_value_error", "snr_t", "phi_t", "rel_mse_t", "d2"}));
    for (const TrialResult& t : results.trials) {
        for (std::size_t q = 0; q < t.kl.size(); ++q) {
            csv.add(t.key.point);
            addSweepValues(csv, results.spec, t.key.point);
            csv.add(schemeName(results, t.key.scheme)).add(t.key.budget)
                .add(static_cast<unsigned long long>(t.key.seed)).add(static_cast<long long>(q));
            csv.add(t.kl[q]).add(t.recall[q]).add(static_cast<long long>(t.argmaxShift[q])).add(t.fisher[q])
                .add(t.a2[q]).add(t.snrT[q]).add(t.phiT[q]).add(t.relMseT[q]).add(t.d2[q]);
            csv.endRow();
        }
    }
    return csv.text();
}

} // namespace kvlens

#include <cstdio>

namespace kvlens {

std::string summaryText(const ResultSet& results)
{
    std::string out;
    char line[320];
    const bool sweep = results.spec.pointCount() > 1;
    if (sweep)
        out += "grid points: " + std::to_string(results.spec.pointCount()) + "\n";
    std::snprintf(line, sizeof line, "%-12s %2s %7s %7s %11s %11s %11s %7s %7s %7s %7s %7s %7s\n", "scheme", "n",
                  "bits_k", "bits_v", "kl_mean", "kl_p99", "kl_max", "recall", "snr_k", "phi_k", "snr_v", "phi_v",
                  "phi_t");
    out += (sweep ? std::string("point                ") : std::string()) + line;
    for (const SummaryRow& r : summarize(results)) {
        if (sweep) {
            char label[32];
            std::snprintf(label, sizeof label, "%-20.20s ", results.spec.pointLabel(r.point).c_str());
            out += label;
        }
        std::snprintf(line, sizeof line, "%-12s %2d %7.3f %7.3f %11.4e %11.4e %11.4e %7.4f %7.2f %7.4f %7.2f %7.4f %7.4f\n",
                      schemeName(results, r.scheme).c_str(), r.budget, r.bits.key, r.bits.value, r.klMean, r.klP99,
                      r.klMax, r.recallMean, r.sixD.snrK, r.sixD.phiK, r.sixD.snrV, r.sixD.phiV, r.sixD.phiT);
        out += line;
    }
    return out;
}

} // namespace kvlens
