// SPDX-License-Identifier: GPL-3.0-or-later
// Reference, implementation (same RNG) and other-RNG runs, then validateRuns.
#include "app/validation_run.h"

#include "core/experiment/boundary_decisions.h"
#include "core/experiment/runner.h"

namespace kvlens::app {

ValidationRun runValidationSet(const ExperimentSpec& spec, const std::string& device, BackendPool& pool, int threads,
                               const std::function<Progress*(int run, const std::string& label)>& progress)
{
    ExperimentSpec reference = spec, implementation = spec, other = spec;
    reference.backend = BackendKind::Cpu;
    implementation.backend = BackendKind::OpenCl;
    if (!device.empty())
        implementation.device = device;
    other.backend = BackendKind::Cpu;
    other.engine = spec.engine == EngineKind::Pcg64 ? EngineKind::Mt19937_64 : EngineKind::Pcg64;

    std::string fallback;
    auto runOne = [&](const ExperimentSpec& s, int index, const char* what, bool mustBeOpenCl) -> Result<ResultSet> {
        BackendChoice& backend = pool.get(s, threads);
        if (mustBeOpenCl && !backend.warning.empty()) {
            fallback = backend.warning;
            return Error{"backend", backend.warning};
        }
        auto r = runExperiment(s, *backend.backend, progress(index, std::string(what) + " (" + backend.label + ")"));
        if (r)
            r->backend = backend.backend->name();
        return r;
    };
    ValidationRun out;
    auto ref = runOne(reference, 0, "reference", false);
    auto impl = ref ? runOne(implementation, 1, "implementation", true) : Result<ResultSet>(Error{"", ""});
    auto seed = ref ? runOne(other, 2, "other RNG", false) : Result<ResultSet>(Error{"", ""});
    for (const auto* r : {&ref, &seed}) {
        if (!*r) {
            out.failure = r->error();
            return out;
        }
        if ((*r)->cancelled) {
            out.cancelled = true;
            return out;
        }
    }
    if (impl && impl->cancelled) {
        out.cancelled = true;
        return out;
    }
    const ExperimentSpec& ranSpec = ref->spec;
    out.report = stats::validateRuns(*ref, impl ? &impl.value() : nullptr, *seed, 1e-4,
                                     [&ranSpec](const TrialResult& t) { return trialBoundaryDecisions(ranSpec, t.key); });
    if (!impl)
        out.report.implementationNote = fallback.empty() ? impl.error().text() : fallback;
    out.reference = std::move(ref).value();
    return out;
}

} // namespace kvlens::app
