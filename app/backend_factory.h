// SPDX-License-Identifier: GPL-3.0-or-later
// Chooses the compute backend a spec asks for, falling back to the CPU with a reason.
#pragma once

#include "core/experiment/backend.h"
#include "core/lm/transformer.h"
#include "core/spec/eval_spec.h"
#include "core/spec/spec.h"

#include <cstddef>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace kvlens::app {

/// The backend to run with, and what the user is told about it.
struct BackendChoice {
    std::unique_ptr<ComputeBackend> backend;
    std::string label;     ///< "cpu", "opencl: <device>", or "cpu (fallback: <reason>)"
    std::string warning;   ///< non-empty when the request could not be honoured
    std::string note;      ///< "auto": which backend it chose and the measurement behind it
};

/// For "auto" with a usable OpenCL device: the faster of the CPU backend and that device on a
/// short probe run (d = 128, N = 1024, Q = 64, KQV and QKQV at 3 bits, 2 seeds), measured once per
/// (device, driver, program version, threads) and remembered in the program cache's directory
/// (auto-backend-<hash>.txt).
struct AutoChoice {
    bool openclFaster = false;
    double cpuMs = 0.0, openclMs = 0.0;
    bool remembered = false; ///< read from the file, not measured now
};
/// Measurements made by this process (each measures both backends once).
int autoBackendMeasurements();

/// Creates the backend for spec.backend / spec.device: "cpu"; "opencl" (the device
/// spec.device names, else $KVLENS_OPENCL_DEVICE, else the first GPU, else the first CPU
/// device); "auto" (that device or the CPU backend, whichever AutoChoice measured faster;
/// quietly the CPU when OpenCL is absent). An unusable OpenCL
/// request falls back to the CPU backend with the reason in `warning` and `label`.
/// `threads` caps the CPU backend's worker threads (0: one per core).
BackendChoice makeBackend(const ExperimentSpec& spec, int threads = 0);

/// The --backend and --device options applied to a spec, alike for the window and the headless
/// runs: a non-empty `backend` replaces spec.backend; a non-empty `device` names the OpenCL device
/// and, without `backend`, means "opencl".
/// Refuses a `backend` that is not cpu, opencl or auto (field "--backend").
Status applyBackendOptions(ExperimentSpec& spec, const std::string& backend, const std::string& device);

/// The same for an evaluation's spec (its backend and device fields).
Status applyBackendOptions(EvalSpec& spec, const std::string& backend, const std::string& device);

/// Installs the forward device an evaluation's spec asks for on `model` (EvalCallbacks::prepare):
/// "cpu" leaves the CPU; "opencl" sets a gpu::OpenClForward on the device spec.device names (an
/// unusable one: the CPU, the reason on `err` and in the note, as experiments fall back); "auto" times
/// one chunk of spec.ctx tokens on each (the device's after a warm-up pass that builds its kernels)
/// and keeps the faster, the timings in the note; quietly the CPU when OpenCL is absent. Returns the
/// note for the run's files: "" for cpu and opencl, "auto: ..." or "fallback: ..." otherwise.
/// `progress`, when set, says what is being timed.
Result<std::string> prepareForward(const EvalSpec& spec, lm::Transformer& model, std::ostream& err,
                                   std::ostream* progress = nullptr);

/// The backends of a session, one per (kind, device, threads), so that a window re-running
/// after every edit opens each OpenCL device (context, queues, programs) once rather than once
/// per run. Not thread-safe: it belongs to the thread that runs experiments.
class BackendPool {
public:
    /// makeBackend(spec, threads), or the backend made by an earlier call with the same kind
    /// (cpu, opencl or auto), the same device (the one spec.device resolves
    /// to now) and the same threads. A fallback is remembered too: an unusable device is not
    /// reopened on every edit. References stay valid until clear() or the pool's destruction.
    BackendChoice& get(const ExperimentSpec& spec, int threads = 0);

    /// Backends held.
    std::size_t size() const { return m_entries.size(); }
    /// Destroys every backend (none may be running).
    void clear() { m_entries.clear(); }

private:
    struct Entry {
        std::string key;
        BackendChoice choice;
    };
    std::vector<std::unique_ptr<Entry>> m_entries;
};

} // namespace kvlens::app
