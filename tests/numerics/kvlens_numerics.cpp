// SPDX-License-Identifier: GPL-3.0-or-later
// kvlens-numerics: runs a spec on the CPU and writes its trials losslessly (trials.bin's encoding,
// timings zeroed), so that two builds can be compared byte for byte; or compares two such files
// and reports, field by field, how many values differ and by how much at most (the README's
// statement about optimisation levels was measured with it: a -O0 build against the Release one).
//   kvlens-numerics run SPEC.json OUT.bin
//   kvlens-numerics compare A.bin B.bin
#include "core/experiment/runner.h"
#include "core/experiment/shard.h"
#include "core/spec/spec_json.h"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <fstream>
#include <map>
#include <iostream>
#include <sstream>

using namespace kvlens;

namespace {

std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

int run(const std::string& specPath, const std::string& outPath)
{
    auto spec = specFromJson(readFile(specPath));
    if (!spec) {
        std::cerr << "kvlens-numerics: " << spec.error().text() << "\n";
        return 2;
    }
    CpuBackend cpu(2);
    auto result = runExperiment(*spec, cpu);
    if (!result) {
        std::cerr << "kvlens-numerics: " << result.error().text() << "\n";
        return 2;
    }
    std::vector<std::uint64_t> ids;
    for (TrialResult& t : result->trials) {
        t.timings = TrialTimings{};
        ids.push_back(ids.size());
    }
    std::ofstream(outPath, std::ios::binary) << encodeTrials(0, result->trials, ids);
    std::cout << "kvlens-numerics: " << result->trials.size() << " trials written to " << outPath << "\n";
    return 0;
}

/// Largest relative difference per field over every trial, and the count of differing values.
struct FieldDiff {
    double worst = 0.0, worstA = 0.0, worstB = 0.0, worstAbs = 0.0;
    long long differing = 0, values = 0;
};

void note(std::map<std::string, FieldDiff>& diffs, const std::string& name, double x, double y)
{
    FieldDiff& f = diffs[name];
    ++f.values;
    if (x == y || (std::isnan(x) && std::isnan(y)))
        return;
    ++f.differing;
    f.worstAbs = std::max(f.worstAbs, std::abs(x - y));
    const double rel = std::abs(x - y) / std::max(std::abs(x), std::abs(y));
    if (rel > f.worst || std::isnan(rel)) {
        f.worst = rel;
        f.worstA = x;
        f.worstB = y;
    }
}

void noteArray(std::map<std::string, FieldDiff>& diffs, const std::string& name, const std::vector<float>& x,
               const std::vector<float>& y)
{
    for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i)
        note(diffs, name, x[i], y[i]);
}

int compare(const std::string& aPath, const std::string& bPath)
{
    const std::string a = readFile(aPath), b = readFile(bPath);
    if (a == b) {
        std::cout << "kvlens-numerics: identical (" << a.size() << " bytes)\n";
        return 0;
    }
    auto ta = decodeTrials(a), tb = decodeTrials(b);
    if (!ta || !tb || ta->trials.size() != tb->trials.size()) {
        std::cerr << "kvlens-numerics: the files differ and do not hold the same trials\n";
        return 1;
    }
    std::map<std::string, FieldDiff> diffs;
    for (std::size_t i = 0; i < ta->trials.size(); ++i) {
        const TrialResult &x = ta->trials[i], &y = tb->trials[i];
        const auto sx = x.sixD.values(), sy = y.sixD.values();
        for (std::size_t k = 0; k < 6; ++k)
            note(diffs, SixD::kNames[k], sx[k], sy[k]);
        note(diffs, "bits", x.bits.key + x.bits.value, y.bits.key + y.bits.value);
        note(diffs, "rel_mse_k", x.relMseK, y.relMseK);
        note(diffs, "rel_mse_v", x.relMseV, y.relMseV);
        note(diffs, "score_err_mean", x.scoreErrorMean, y.scoreErrorMean);
        note(diffs, "score_err_var", x.scoreErrorVar, y.scoreErrorVar);
        note(diffs, "score_err_var_pred", x.scoreErrorVarPredicted, y.scoreErrorVarPredicted);
        note(diffs, "entropy", x.meanEntropy, y.meanEntropy);
        note(diffs, "saturated", x.saturatedNorms, y.saturatedNorms);
        noteArray(diffs, "kl", x.kl, y.kl);
        noteArray(diffs, "recall", x.recall, y.recall);
        noteArray(diffs, "fisher", x.fisher, y.fisher);
        noteArray(diffs, "a2", x.a2, y.a2);
        noteArray(diffs, "rel_mse_t", x.relMseT, y.relMseT);
        noteArray(diffs, "samples_k_snr", x.samplesK.snrDb, y.samplesK.snrDb);
        noteArray(diffs, "samples_v_snr", x.samplesV.snrDb, y.samplesV.snrDb);
        for (std::size_t k = 0; k < std::min(x.argmaxShift.size(), y.argmaxShift.size()); ++k)
            note(diffs, "argmax_shift", x.argmaxShift[k], y.argmaxShift[k]);
    }
    std::printf("%-20s %10s %10s %12s %12s  %s\n", "field", "values", "differ", "max rel", "max abs", "(a vs b at the max rel)");
    for (const auto& [name, f] : diffs)
        std::printf("%-20s %10lld %10lld %12.3g %12.3g  %s\n", name.c_str(), f.values, f.differing, f.worst, f.worstAbs,
                    f.differing ? (std::to_string(f.worstA) + " vs " + std::to_string(f.worstB)).c_str() : "");
    return 1;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc == 4 && std::string(argv[1]) == "run")
        return run(argv[2], argv[3]);
    if (argc == 4 && std::string(argv[1]) == "compare")
        return compare(argv[2], argv[3]);
    std::cerr << "usage: kvlens-numerics run SPEC.json OUT.bin | compare A.bin B.bin\n";
    return 2;
}
