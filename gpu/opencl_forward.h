// SPDX-License-Identifier: GPL-3.0-or-later
// The transformer's forward pass on an OpenCL device: an lm::ForwardDevice holding the model's
// weights on the device in their stored types (no OpenCL types here).
#pragma once

#include "core/common/result.h"
#include "core/lm/transformer.h"
#include "gpu/device.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace kvlens::gpu {

/// The forward pass of one model on one OpenCL device, the same ForwardResult as the CPU pass
/// (lm::Transformer::forwardOnCpu) to float rounding (tests/gpu/tst_opencl_forward: logits within
/// 1e-4 relative; evaluations only to 1e-4..1e-2, as codes at quantizer thresholds flip: see the test).
///
/// On the device: the matrix products (the weights uploaded once in their stored types -- f32, f16,
/// bf16 and every ggml block type core dequantizes -- and dequantized into float32 panels inside each
/// product, bit for bit as core's dequantizers; CLBlast's SGEMM on GPUs, forward.cl's register-blocked
/// kernel on CPU devices, where it measured faster: see productEngine), RMSNorm / LayerNorm, RoPE, the
/// MLP's activations, causal attention with the cache's masks (the residual window, the open codec
/// groups, Mistral's sliding window), llama.cpp's query conversion, the proxies' oracle damage, and the
/// logits of rows logitsStart..T-1, downloaded. On the host: the embedding rows (a gather), the KV
/// cache hook (its codecs are CPU code: per hooked layer K and V come down and khat, vhat go up, the
/// hook's (layer, KV head) calls spread over the model's threads), the cache-side damage, and what
/// options ask to keep (layerInputs, capture: downloaded per layer). A probe (the drill-down's one
/// query) runs the whole pass on the CPU (forwardOnCpu). An OpenCL failure during a pass runs that
/// pass on the CPU instead and is counted in label().
///
/// forward() is const and may run from several threads at once: each pass takes its own command
/// queue, kernel objects and scratch buffers (kept for later passes).
class OpenClForward final : public lm::ForwardDevice {
public:
    /// Opens the device `request` names (gpu::selectDevice's rules), builds the forward's kernels and
    /// uploads `model`'s weight matrices, norms and biases. Refused, naming the device: no usable
    /// device, a kernel build failure (with the build log), weights larger than the device's memory
    /// (both sizes given), KVLENS_FORWARD_PRODUCTS naming an engine this build lacks.
    static Result<std::shared_ptr<OpenClForward>> create(const lm::Transformer& model, const std::string& request = {});
    ~OpenClForward() override;

    /// The pass of `model` (the one whose weights this device holds: refused otherwise) over `tokens`.
    Result<lm::ForwardResult> forward(const lm::Transformer& model, std::span<const std::int32_t> tokens,
                                      const lm::ForwardOptions& options) const override;
    /// "OpenCL, <device> (CPU|GPU kernels); products by <engine> on float32 panels of the stored weights
    /// (<types>); KV codecs on the CPU (per layer K and V down, khat and vhat up)", plus the passes
    /// that fell back to the CPU, if any.
    std::string label() const override;

    const DeviceInfo& device() const;
    /// "CLBlast" or "own kernel".
    std::string productEngine() const;
    /// Bytes of weights held on the device.
    std::uint64_t weightBytes() const;
    /// Passes that ran on the CPU after an OpenCL failure.
    int fallbacks() const;
    /// The device's product rate: out = a w^T for `rows` random activation rows and layer 0's MLP
    /// matrix as stored (panels dequantized inside), GFLOP/s, median of `repeats` after a warm-up.
    Result<double> productGflops(int rows, int repeats) const;

    struct Impl;

private:
    explicit OpenClForward(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

} // namespace kvlens::gpu
