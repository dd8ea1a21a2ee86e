// SPDX-License-Identifier: GPL-3.0-or-later
// The OpenCL C sources, embedded at build time (gpu/kernels/*.cl), with a development override.
#pragma once

#include "core/common/result.h"

#include <string>
#include <vector>

namespace kvlens::gpu {

struct EmbeddedKernel {
    const char* name;   ///< file name without .cl
    const char* source;
};

/// Every kernel file compiled into the library.
const std::vector<EmbeddedKernel>& embeddedKernels();

/// The source of kernel file `name` ("common", "quantize", "gemm", "qjl", "attention"): the
/// embedded copy, or $KVLENS_KERNEL_DIR/<name>.cl when that variable is set (for kernel
/// development without rebuilding). Errors name the file.
Result<std::string> kernelSource(const std::string& name);

} // namespace kvlens::gpu
