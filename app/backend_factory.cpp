// SPDX-License-Identifier: GPL-3.0-or-later
// Backend selection: OpenCL when asked for and usable, else the CPU with the reason; a pool reuses them.
#include "app/backend_factory.h"

#include "core/experiment/runner.h"
#include "core/io/atomic_file.h"
#include "core/spec/spec_json.h"
#include "gpu/device.h"
#include "gpu/opencl_backend.h"
#include "gpu/opencl_forward.h"
#include "gpu/program_cache.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <sstream>

namespace kvlens::app {

namespace {

std::atomic<int> g_autoMeasurements{0};

/// Median of three timed runs after a warm-up (which also builds the OpenCL programs).
double probeMs(ComputeBackend& backend)
{
    static const ExperimentSpec probe = *specFromJson(R"({"d": 128, "tokens": 1024, "queries": 64,
        "schemes": ["KQV", "QKQV"], "budgets": [3], "seeds": {"count": 2}})");
    double times[3] = {};
    (void)runExperiment(probe, backend);
    for (double& t : times) {
        const auto start = std::chrono::steady_clock::now();
        (void)runExperiment(probe, backend);
        t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    std::sort(std::begin(times), std::end(times));
    return times[1];
}

AutoChoice chooseAuto(gpu::OpenClBackend& opencl, int threads)
{
    const gpu::DeviceInfo& d = opencl.device();
    const std::string path = gpu::programCacheDirectory() + "/auto-backend-"
                             + gpu::fnv1aHex(d.platform + "|" + d.name + "|" + d.driver + "|" + d.version + "|"
                                             + KVLENS_VERSION + "|threads " + std::to_string(threads))
                             + ".txt";
    AutoChoice choice;
    {
        std::ifstream in(path);
        std::string winner;
        if (in >> winner >> choice.cpuMs >> choice.openclMs && (winner == "cpu" || winner == "opencl")
            && choice.cpuMs > 0.0 && choice.openclMs > 0.0) {
            choice.openclFaster = winner == "opencl";
            choice.remembered = true;
            return choice;
        }
    }
    ++g_autoMeasurements;
    CpuBackend cpu(threads);
    choice.cpuMs = probeMs(cpu);
    choice.openclMs = probeMs(opencl);
    choice.openclFaster = choice.openclMs < choice.cpuMs;
    std::ostringstream text;
    text << (choice.openclFaster ? "opencl" : "cpu") << " " << choice.cpuMs << " " << choice.openclMs << "\n";
    (void)makeDirectories(gpu::programCacheDirectory());
    (void)writeFileAtomic(path, text.str()); // a cache: a read-only home only means measuring again
    return choice;
}

std::string ms(double v)
{
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.1f", v);
    return buffer;
}

} // namespace

int autoBackendMeasurements()
{
    return g_autoMeasurements.load();
}

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

Status applyBackendOptions(EvalSpec& spec, const std::string& backend, const std::string& device)
{
    ExperimentSpec carrier;
    carrier.backend = spec.backend;
    carrier.device = spec.device;
    if (auto ok = applyBackendOptions(carrier, backend, device); !ok)
        return ok;
    spec.backend = carrier.backend;
    spec.device = carrier.device;
    return Ok{};
}

namespace {

/// Milliseconds of one forward of `tokens` scoring the second half (the evaluator's pass) on `model`'s
/// device, or on the CPU with `cpu`.
Result<double> chunkMs(const lm::Transformer& model, const std::vector<std::int32_t>& tokens, bool cpu)
{
    lm::ForwardOptions options;
    options.logitsStart = static_cast<int>(tokens.size()) / 2;
    const auto start = std::chrono::steady_clock::now();
    auto pass = cpu ? model.forwardOnCpu(tokens, options) : model.forward(tokens, options);
    if (!pass)
        return pass.error();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

/// "auto": one chunk on the device (after a warm-up) and on the CPU; the device stays when faster.
Result<std::string> chooseForward(const EvalSpec& spec, lm::Transformer& model,
                                  std::shared_ptr<gpu::OpenClForward> device, std::ostream* progress)
{
    const lm::ModelConfig& c = model.config();
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(std::min(spec.ctx, c.maxChunkTokens())));
    for (std::size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = static_cast<std::int32_t>((i * 7919 + 1) % static_cast<std::size_t>(c.vocab));
    if (progress)
        *progress << "kvlens eval: auto: timing one chunk of " << tokens.size() << " tokens on the CPU and on OpenCL "
                  << device->device().label() << "\n";
    model.setDevice(device);
    double deviceMs = 0.0;
    for (int pass = 0; pass < 2; ++pass) { // the first builds the device's kernels
        auto timed = chunkMs(model, tokens, false);
        if (!timed)
            return timed.error();
        deviceMs = *timed;
    }
    auto timed = chunkMs(model, tokens, true);
    if (!timed)
        return timed.error();
    const double cpuMs = *timed;
    const std::string numbers = "one chunk of " + std::to_string(tokens.size()) + " tokens: CPU " + ms(cpuMs)
                                + " ms, OpenCL " + ms(deviceMs) + " ms";
    if (cpuMs <= deviceMs) {
        model.setDevice(nullptr);
        return "auto: the CPU, faster here than OpenCL " + device->device().label() + " (" + numbers + ")";
    }
    return "auto: OpenCL, faster here than the CPU (" + numbers + ")";
}

} // namespace

Result<std::string> prepareForward(const EvalSpec& spec, lm::Transformer& model, std::ostream& err, std::ostream* progress)
{
    if (spec.backend == BackendKind::Cpu)
        return std::string();
    auto device = gpu::OpenClForward::create(model, spec.device);
    if (!device) {
        if (spec.backend == BackendKind::Auto)
            return "auto: the CPU (no usable OpenCL device: " + device.error().text() + ")";
        err << "kvlens: OpenCL unusable, the forward runs on the CPU: " << device.error().text() << "\n";
        return "fallback: " + device.error().text();
    }
    if (spec.backend == BackendKind::Auto)
        return chooseForward(spec, model, *device, progress);
    model.setDevice(*device);
    return std::string();
}

BackendChoice makeBackend(const ExperimentSpec& spec, int threads)
{
    BackendChoice choice;
    if (spec.backend != BackendKind::Cpu) {
        auto opencl = gpu::OpenClBackend::create(spec.device);
        if (opencl && spec.backend == BackendKind::Auto) {
            const AutoChoice measured = chooseAuto(**opencl, threads);
            const std::string numbers = " (probe run: CPU " + ms(measured.cpuMs) + " ms, OpenCL " + ms(measured.openclMs)
                                        + " ms" + (measured.remembered ? ", measured earlier on this machine)" : ")");
            if (!measured.openclFaster) {
                choice.note = "auto: the CPU backend, faster here than OpenCL " + (*opencl)->device().label() + numbers;
                choice.backend = std::make_unique<CpuBackend>(threads);
                choice.label = "cpu";
                return choice;
            }
            choice.note = "auto: OpenCL " + (*opencl)->device().label() + ", faster here than the CPU backend" + numbers;
        }
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
        if (spec.backend == BackendKind::Auto)
            key = "auto " + key; // may choose the CPU backend: not the same entry as "opencl"
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
