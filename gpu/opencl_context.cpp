// SPDX-License-Identifier: GPL-3.0-or-later
// Device opening and program building with the binary cache; cl::Error stays inside gpu/.
#include "gpu/opencl_context.h"

#include "gpu/kernel_sources.h"

#include <cstdlib>

namespace kvlens::gpu {

std::string clErrorText(int code)
{
    switch (code) {
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND (-1)";
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE (-2)";
    case CL_COMPILER_NOT_AVAILABLE: return "CL_COMPILER_NOT_AVAILABLE (-3)";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES (-5)";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY (-6)";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE (-11)";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE (-30)";
    case CL_INVALID_BINARY: return "CL_INVALID_BINARY (-42)";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS (-52)";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE (-54)";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE (-61)";
    case CL_PLATFORM_NOT_FOUND_KHR: return "CL_PLATFORM_NOT_FOUND_KHR (-1001): no OpenCL platform installed";
    default: return "OpenCL error " + std::to_string(code);
    }
}

Result<std::shared_ptr<OpenClContext>> OpenClContext::create(const std::string& request)
{
    auto chosen = selectDevice(request);
    if (!chosen)
        return chosen.error();
    try {
        std::vector<cl::Platform> platforms;
        cl::Platform::get(&platforms);
        std::vector<cl::Device> all;
        for (const auto& p : platforms) {
            std::vector<cl::Device> devices;
            try {
                p.getDevices(CL_DEVICE_TYPE_ALL, &devices);
            } catch (const cl::Error&) {
                continue;
            }
            all.insert(all.end(), devices.begin(), devices.end());
        }
        if (chosen->index < 0 || chosen->index >= static_cast<int>(all.size()))
            return Error{"device", "the OpenCL device list changed while opening it"};
        auto ctx = std::shared_ptr<OpenClContext>(new OpenClContext());
        ctx->m_info = *chosen;
        ctx->m_device = all[static_cast<std::size_t>(chosen->index)];
        ctx->m_context = cl::Context(ctx->m_device);
        ctx->m_style = chosen->type == "GPU" ? KernelStyle::Gpu : KernelStyle::Cpu;
        if (const char* style = std::getenv("KVLENS_OPENCL_STYLE")) {
            if (std::string(style) == "gpu")
                ctx->m_style = KernelStyle::Gpu;
            else if (std::string(style) == "cpu")
                ctx->m_style = KernelStyle::Cpu;
        }
        const std::string extensions = ctx->m_device.getInfo<CL_DEVICE_EXTENSIONS>();
        ctx->m_hasDouble = extensions.find("cl_khr_fp64") != std::string::npos;
        return ctx;
    } catch (const cl::Error& e) {
        return Error{"OpenCL", chosen->label() + ": cannot open the device: " + e.what() + " " + clErrorText(e.err())};
    }
}

BuildStats OpenClContext::stats() const
{
    const std::lock_guard lock(m_mutex);
    return m_stats;
}

Result<cl::Program> OpenClContext::program(const std::vector<std::string>& files, const std::string& defines)
{
    std::string options = defines + " -cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt";
    if (m_style == KernelStyle::Gpu)
        options += " -DGPU_STYLE";
    std::string memoKey = options;
    for (const auto& f : files)
        memoKey += "|" + f;
    const std::lock_guard lock(m_mutex);
    if (auto it = m_programs.find(memoKey); it != m_programs.end())
        return it->second;

    std::string source;
    for (const std::string& name : std::vector<std::string>{"common"}) {
        auto text = kernelSource(name);
        if (!text)
            return text.error();
        source += *text + "\n";
    }
    for (const auto& name : files) {
        auto text = kernelSource(name);
        if (!text)
            return text.error();
        source += *text + "\n";
    }
    const std::string cacheKey =
        ProgramCache::key(m_info.platform, m_info.name, m_info.driver, m_info.version, options, source);
    // A cached binary first; any failure there falls through to a build from source.
    if (auto binary = m_cache.load(cacheKey)) {
        try {
            cl::Program::Binaries binaries{*binary};
            cl::Program program(m_context, {m_device}, binaries);
            program.build({m_device}, options.c_str());
            ++m_stats.cachedLoads;
            m_programs.emplace(memoKey, program);
            return program;
        } catch (const cl::Error&) {
        }
    }
    cl::Program program;
    try {
        program = cl::Program(m_context, source);
        program.build({m_device}, options.c_str());
    } catch (const cl::Error& e) {
        std::string log;
        try {
            log = program.getBuildInfo<CL_PROGRAM_BUILD_LOG>(m_device);
        } catch (const cl::Error&) {
        }
        return Error{"OpenCL", m_info.label() + ": kernel build failed with options '" + options + "': "
                                   + clErrorText(e.err()) + (log.empty() ? "" : "\nbuild log:\n" + log)};
    }
    ++m_stats.sourceBuilds;
    try {
        const auto binaries = program.getInfo<CL_PROGRAM_BINARIES>();
        if (!binaries.empty())
            m_cache.store(cacheKey, binaries.front());
    } catch (const cl::Error&) {
        // Not every driver returns binaries; the cache is an optimisation only.
    }
    m_programs.emplace(memoKey, program);
    return program;
}

} // namespace kvlens::gpu
