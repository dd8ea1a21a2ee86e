// SPDX-License-Identifier: GPL-3.0-or-later
// Chooses the compute backend a spec asks for, falling back to the CPU with a reason.
#pragma once

#include "core/experiment/backend.h"
#include "core/experiment/spec.h"

#include <memory>
#include <string>

namespace kvlens::app {

/// The backend to run with, and what the user is told about it.
struct BackendChoice {
    std::unique_ptr<ComputeBackend> backend;
    std::string label;     ///< "cpu", "opencl: <device>", or "cpu (fallback: <reason>)"
    std::string warning;   ///< non-empty when the request could not be honoured
};

/// Creates the backend for spec.backend / spec.device: "cpu"; "opencl" (the device
/// spec.device names, else $KVLENS_OPENCL_DEVICE, else the first GPU, else the first CPU
/// device); "auto" (the same, quietly using the CPU when OpenCL is absent). An unusable OpenCL
/// request falls back to the CPU backend with the reason in `warning` and `label`.
/// `threads` caps the CPU backend's worker threads (0: one per core).
BackendChoice makeBackend(const ExperimentSpec& spec, int threads = 0);

} // namespace kvlens::app
