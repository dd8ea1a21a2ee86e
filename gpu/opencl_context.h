// SPDX-License-Identifier: GPL-3.0-or-later
// One OpenCL device with its context and built programs (internal to gpu/ and its tests).
#pragma once

#include "core/common/result.h"
#include "gpu/device.h"
#include "gpu/program_cache.h"

#include <CL/opencl.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kvlens::gpu {

/// How kernels map work to work-items on this device.
enum class KernelStyle {
    Cpu, ///< one work-item per vector / register block, explicit vector types (PoCL, CPUs)
    Gpu, ///< work-groups with local memory (GPUs)
};

/// Build statistics, so a test can see that the second start loaded cached binaries.
struct BuildStats {
    int sourceBuilds = 0;
    int cachedLoads = 0;
};

class OpenClContext {
public:
    /// Opens the device `request` names (selectDevice rules). The kernel style follows the
    /// device type unless $KVLENS_OPENCL_STYLE is "cpu" or "gpu" (tests run both on PoCL).
    static Result<std::shared_ptr<OpenClContext>> create(const std::string& request);

    const DeviceInfo& info() const { return m_info; }
    KernelStyle style() const { return m_style; }
    bool hasDouble() const { return m_hasDouble; }
    cl::Context& context() { return m_context; }
    const cl::Device& device() const { return m_device; }

    /// The program made of common.cl, then each of `files`, built with `defines` (e.g.
    /// "-DDIM=128") plus the style and precision options. Built once per context (the GUI keeps
    /// one per device for the session); binaries are cached on disk. Errors carry the device
    /// name, the options and the build log.
    Result<cl::Program> program(const std::vector<std::string>& files, const std::string& defines);

    BuildStats stats() const;

private:
    OpenClContext() = default;

    DeviceInfo m_info;
    cl::Device m_device;
    cl::Context m_context;
    KernelStyle m_style = KernelStyle::Cpu;
    bool m_hasDouble = false;
    ProgramCache m_cache;
    mutable std::mutex m_mutex;
    std::map<std::string, cl::Program> m_programs;
    BuildStats m_stats;
};

/// "CL_OUT_OF_RESOURCES (-5)"-style text for an OpenCL error code.
std::string clErrorText(int code);

} // namespace kvlens::gpu
