// SPDX-License-Identifier: GPL-3.0-or-later
// Backend selection: OpenCL when asked for and usable, else the CPU with the reason; a pool reuses them.
#include "app/backend_factory.h"

#include "gpu/device.h"
#include "gpu/opencl_backend.h"

namespace kvlens::app {

Status applyBackendOptions(ExperimentSpec& spec, const std::string& backend, const std::string& device)
{
    if (!backend.empty()) {
        const auto parsed = parseBackendText(backend);
        if (!parsed || !parsed->fallback.empty())
            return Error{"--backend", "must be one of cpu, opencl, auto, got '" + backend + "'"};
        spec.backend = parsed->kind;
    }
    if (!device.empty()) {
        spec.device = device;
        if (backend.empty())
            spec.backend = BackendKind::OpenCl;
    }
    return Ok{};
}

BackendChoice makeBackend(const ExperimentSpec& spec, int threads)
{
    BackendChoice choice;
    if (spec.backend != BackendKind::Cpu) {
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

BackendChoice& BackendPool::get(const ExperimentSpec& spec, int threads)
{
    // The key is the device the request resolves to, so "" and "0" share a context when they
    // name the same device; a request that resolves to nothing is keyed by its text.
    std::string key;
    if (spec.backend != BackendKind::Cpu) {
        const auto device = gpu::selectDevice(spec.device);
        key = device ? "opencl #" + std::to_string(device->index) : "opencl ?" + spec.device;
    } else {
        key = "cpu";
    }
    key += " threads " + std::to_string(threads);
    for (const auto& entry : m_entries)
        if (entry->key == key) {
            // A reused OpenCL backend reports the fallbacks of the coming run only.
            if (auto* opencl = dynamic_cast<gpu::OpenClBackend*>(entry->choice.backend.get()))
                opencl->resetFallbacks();
            return entry->choice;
        }
    m_entries.push_back(std::make_unique<Entry>(Entry{std::move(key), makeBackend(spec, threads)}));
    return m_entries.back()->choice;
}

} // namespace kvlens::app
