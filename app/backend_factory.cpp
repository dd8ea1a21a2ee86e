// SPDX-License-Identifier: GPL-3.0-or-later
// Backend selection: OpenCL when asked for and usable, else the CPU with the reason.
#include "app/backend_factory.h"

#include "gpu/opencl_backend.h"

namespace kvlens::app {

BackendChoice makeBackend(const ExperimentSpec& spec, int threads)
{
    BackendChoice choice;
    if (spec.backend == "opencl" || spec.backend == "auto") {
        auto opencl = gpu::OpenClBackend::create(spec.device);
        if (opencl) {
            choice.label = "opencl: " + (*opencl)->device().name;
            choice.backend = std::move(opencl).value();
            return choice;
        }
        choice.warning = opencl.error().text();
    }
    choice.backend = std::make_unique<CpuBackend>(threads);
    choice.label = choice.warning.empty() ? "cpu" : "cpu (fallback: " + choice.warning + ")";
    return choice;
}

} // namespace kvlens::app
