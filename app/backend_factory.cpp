// SPDX-License-Identifier: GPL-3.0-or-later
// Backend selection.
#include "app/backend_factory.h"

namespace kvlens::app {

BackendChoice makeBackend(const ExperimentSpec& spec, int threads)
{
    BackendChoice choice;
    choice.backend = std::make_unique<CpuBackend>(threads);
    choice.label = "cpu";
    if (spec.backend == "opencl") {
        choice.warning = "the OpenCL backend is not built yet; running on the CPU";
        choice.label = "cpu (fallback: " + choice.warning + ")";
    }
    return choice;
}

} // namespace kvlens::app
