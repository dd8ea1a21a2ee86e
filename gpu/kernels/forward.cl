// SPDX-License-Identifier: GPL-3.0-or-later
// The transformer's forward pass on an OpenCL device (gpu/opencl_forward.cpp): the weights' stored
// types dequantized a panel at a time (ggml's dequantize_row_* arithmetic: every value an exact
// product plus at most one rounding, so the panels equal core's bit for bit), the products' own
// kernel, RMSNorm / LayerNorm, rotate-half RoPE, the MLP activations, llama.cpp's query conversion,
// and causal attention reading the quantized cache (khat/vhat) where core/lm's masks say so, with
// the per-query damage of the proxy study.
//
// CPU devices (default) run CPU-style kernels: a work-item owns a row, a register block or a run of
// values, in explicit float8 vectors (PERF-NOTES: 15-400x faster on PoCL than GPU idioms). GPUs
// (-DGPU_STYLE) run the reductions as work-groups with local memory (NORM_GROUP work-items per row)
// and the products as 16 x 16 tiles (when CLBlast is absent; with it the host calls clblast::Gemm).

// --- stored types --------------------------------------------------------------------------------

inline uint load_u16(const __global uchar* p)
{
    return (uint)p[0] | ((uint)p[1] << 8);
}

// IEEE binary16 bits to float, exactly (core/common/fp16.cpp halfBitsToFloat; a NaN comes out quiet,
// as F16C gives it: core's dequantizer for f16 weights).
inline float half_bits_to_float(uint h)
{
    const uint sign = (h & 0x8000u) << 16;
    const uint exponent = (h >> 10) & 0x1fu;
    const uint mantissa = h & 0x3ffu;
    if (exponent == 0x1fu)
        return as_float(sign | 0x7f800000u | (mantissa << 13) | (mantissa != 0u ? 0x400000u : 0u));
    if (exponent != 0u)
        return as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    return as_float(sign | as_uint((float)mantissa * 5.9604644775390625e-8f));
}

inline float bf16_bits_to_float(uint b)
{
    return as_float(b << 16);
}

// Every dequantizer: rows x cols values of one stored type starting `offset` bytes into src, rows
// `row_bytes` apart, into dst (rows x cols float32, row-major). One work-item per block.

// f16 and bf16: eight values per work-item; global size rows * ceil(cols / 8).
__kernel void dequant_f16(__global const uchar* src, ulong offset, ulong row_bytes, int rows, int cols,
                          __global float* dst)
{
    const int units = (cols + 7) / 8;
    const size_t id = get_global_id(0);
    if (id >= (size_t)rows * units)
        return;
    const int r = (int)(id / units), c0 = (int)(id % units) * 8;
    const __global uchar* p = src + offset + (size_t)r * row_bytes;
    for (int c = c0; c < c0 + 8 && c < cols; ++c)
        dst[(size_t)r * cols + c] = half_bits_to_float(load_u16(p + 2 * c));
}

__kernel void dequant_bf16(__global const uchar* src, ulong offset, ulong row_bytes, int rows, int cols,
                           __global float* dst)
{
    const int units = (cols + 7) / 8;
    const size_t id = get_global_id(0);
    if (id >= (size_t)rows * units)
        return;
    const int r = (int)(id / units), c0 = (int)(id % units) * 8;
    const __global uchar* p = src + offset + (size_t)r * row_bytes;
    for (int c = c0; c < c0 + 8 && c < cols; ++c)
        dst[(size_t)r * cols + c] = bf16_bits_to_float(load_u16(p + 2 * c));
}

// The 32-value blocks (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl): global size rows * cols / 32.
#define BLOCK_ID(values)                                           \
    const int units = cols / (values);                             \
    const size_t id = get_global_id(0);                            \
    if (id >= (size_t)rows * units)                                \
        return;                                                    \
    const int r = (int)(id / units), u = (int)(id % units);        \
    __global float* y = dst + (size_t)r * cols + (size_t)u * (values);

__kernel void dequant_q8_0(__global const uchar* src, ulong offset, ulong row_bytes, int rows, int cols,
                           __global float* dst)
{
    BLOCK_ID(32)
    const __global uchar* b = src + offset + (size_t)r * row_bytes + (size_t)u * 34;
    const float d = half_bits_to_float(load_u16(b));
    for (int j = 0; j < 32; ++j)
        y[j] = (float)(char)b[2 + j] * d;
}

__constant char kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// q4_0 (level q - 8) and iq4_nl (kIq4nl[q]): fp16 d, 16 bytes of nibbles.
__kernel void dequant_q4_0(__global const uchar* src, ulong offset, ulong row_bytes, int rows, int cols,
                           __global float* dst)
{
    BLOCK_ID(32)
    const __global uchar* b = src + offset + (size_t)r * row_bytes + (size_t)u * 18;
    const float d = half_bits_to_float(load_u16(b));
    for (int j = 0; j < 16; ++j) {
        y[j] = (float)((int)(b[2 + j] & 0x0f) - 8) * d;
        y[j + 16] = (float)((int)(b[2 + j] >> 4) - 8) * d;
    }
}

__kernel void dequant_iq4_nl(__global const uchar* src, ulong offset, ulong row_bytes, int rows, int cols,
                             __global float* dst)
{
    BLOCK_ID(32)
    const __global uchar* b = src + offset + (size_t)r * row_bytes + (size_t)u * 18;
    const float d = half_bits_to_float(load_u16(b));
    for (int j = 0; j < 16; ++j) {
        y[j] = (float)kIq4nl[b[2 + j] & 0x0f] * d;
        y[j + 16] = (float)kIq4nl[b[2 + j] >> 4] * d;
    }
}

// q4_1, q5_0, q5_1: `has_min` adds the fp16 minimum after the exact product (one rounding); `fifth`
// reads the little-endian qh word's bit j as value j's fifth bit.
inline void small_block(const __global uchar* b, int has_min, int fifth, __global float* y)
{
    const float d = half_bits_to_float(load_u16(b));
    const float m = has_min ? half_bits_to_float(load_u16(b + 2)) : 0.0f;
    const __global uchar* h = b + (has_min ? 4 : 2);
    const uint qh = fifth ? ((uint)h[0] | ((uint)h[1] << 8) | ((uint)h[2] << 16) | ((uint)h[3] << 24)) : 0u;
    const __global uchar* qs = h + (fifth ? 4 : 0);
    const int offset = has_min ? 0 : (fifth ? 16 : 8);
    for (int j = 0; j < 16; ++j) {
        const int q0 = (int)(qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
        const int q1 = (int)(qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        const float p0 = (float)(q0 - offset) * d;
        const float p1 = (float)(q1 - offset) * d;
        // No "+ 0" without a minimum: it would turn a -0 product into +0 where ggml keeps -0.
        y[j] = has_min ? p0 + m : p0;
        y[j + 16] = has_min ? p1 + m : p1;
    }
}

__kernel void dequant_q4_1(__global const uchar* src, ulong offset, ulong row_bytes, int rows, int cols,
                           __global float* dst)
{
    BLOCK_ID(32)
    small_block(src + offset + (size_t)r * row_bytes + (size_t)u * 20, 1, 0, y);
}

__kernel void dequant_q5_0(__global const uchar* src, ulong offset, ulong row_bytes, int rows, int cols,
                           __global float* dst)
{
    BLOCK_ID(32)
    small_block(src + offset + (size_t)r * row_bytes + (size_t)u * 22, 0, 1, y);
}

__kernel void dequant_q5_1(__global const uchar* src, ulong offset, ulong row_bytes, int rows, int cols,
                           __global float* dst)
{
    BLOCK_ID(32)
    small_block(src + offset + (size_t)r * row_bytes + (size_t)u * 24, 1, 1, y);
}

// ggml's get_scale_min_k4: the 6-bit scale and minimum of sub-block j (0..7) of a q4_K / q5_K block.
inline void scale_min_k4(int j, const __global uchar* q, uint* sc, uint* m)
{
    if (j < 4) {
        *sc = q[j] & 63u;
        *m = q[j + 4] & 63u;
    } else {
        *sc = (q[j + 4] & 0xfu) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// q4_K (fifth = 0, 144 bytes) and q5_K (fifth = 1, 176 bytes): 256 values per super-block, four
// chunks of 64 (low nibbles, then high nibbles); x = (d sc) q - dmin m, the products exact.
inline void k45_block(const __global uchar* b, int fifth, __global float* y)
{
    const float d = half_bits_to_float(load_u16(b));
    const float dmin = half_bits_to_float(load_u16(b + 2));
    const __global uchar* scales = b + 4;
    const __global uchar* qh = b + 16;
    const __global uchar* q = b + (fifth ? 48 : 16);
    for (int c = 0; c < 4; ++c, q += 32) {
        uint sc, m;
        scale_min_k4(2 * c, scales, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        scale_min_k4(2 * c + 1, scales, &sc, &m);
        const float d2 = d * (float)sc, m2 = dmin * (float)m;
        const uint low_bit = 1u << (2 * c), high_bit = 2u << (2 * c);
        for (int l = 0; l < 32; ++l) {
            const int hi = fifth && (qh[l] & low_bit) ? 16 : 0;
            *y++ = d1 * (float)((int)(q[l] & 0x0f) + hi) - m1;
        }
        for (int l = 0; l < 32; ++l) {
            const int hi = fifth && (qh[l] & high_bit) ? 16 : 0;
            *y++ = d2 * (float)((int)(q[l] >> 4) + hi) - m2;
        }
    }
}

__kernel void dequant_q4_K(__global const uchar* src, ulong offset, ulong row_bytes, int rows, int cols,
                           __global float* dst)
{
    BLOCK_ID(256)
    k45_block(src + offset + (size_t)r * row_bytes + (size_t)u * 144, 0, y);
}

__kernel void dequant_q5_K(__global const uchar* src, ulong offset, ulong row_bytes, int rows, int cols,
                           __global float* dst)
{
    BLOCK_ID(256)
    k45_block(src + offset + (size_t)r * row_bytes + (size_t)u * 176, 1, y);
}

// q6_K: ql[128], qh[64], int8 scales[16], fp16 d; x = d sc (q - 32), exact.
__kernel void dequant_q6_K(__global const uchar* src, ulong offset, ulong row_bytes, int rows, int cols,
                           __global float* dst)
{
    BLOCK_ID(256)
    const __global uchar* b = src + offset + (size_t)r * row_bytes + (size_t)u * 210;
    const float d = half_bits_to_float(load_u16(b + 208));
    const __global uchar* ql = b;
    const __global uchar* qh = b + 128;
    const __global char* sc = (const __global char*)(b + 192);
    for (int part = 0; part < 2; ++part, y += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = (int)((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = (int)((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * (float)sc[is] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
    }
}

// --- the products' own kernel: C = A B^T ------------------------------------------------------------
// A: M x K (lda), B: N x K (ldb, weight rows), C: M x N (ldc); element offsets into each buffer.

#ifndef GPU_STYLE

#define PM 4
#define PN 4

// Global size (ceil(N / PN), ceil(M / PM)): a PM x PN register block of float8 dot products.
__kernel void matmul_nt(int M, int N, int K, __global const float* A, ulong a_off, int lda, __global const float* B,
                        ulong b_off, int ldb, __global float* C, ulong c_off, int ldc)
{
    const int bj = get_global_id(0) * PN, bi = get_global_id(1) * PM;
    if (bi >= M || bj >= N)
        return;
    A += a_off;
    B += b_off;
    C += c_off;
    float8 acc[PM][PN];
#pragma unroll
    for (int r = 0; r < PM; ++r)
#pragma unroll
        for (int c = 0; c < PN; ++c)
            acc[r][c] = (float8)(0.0f);
    // Rows past the edge read the block's first row (valid memory); their results are never written.
    const __global float* rowA[PM];
    const __global float* rowB[PN];
#pragma unroll
    for (int r = 0; r < PM; ++r)
        rowA[r] = A + (size_t)(bi + r < M ? bi + r : bi) * lda;
#pragma unroll
    for (int c = 0; c < PN; ++c)
        rowB[c] = B + (size_t)(bj + c < N ? bj + c : bj) * ldb;
    int k = 0;
    for (; k + 8 <= K; k += 8) {
        float8 a[PM], b[PN];
#pragma unroll
        for (int r = 0; r < PM; ++r)
            a[r] = vload8(0, rowA[r] + k);
#pragma unroll
        for (int c = 0; c < PN; ++c)
            b[c] = vload8(0, rowB[c] + k);
#pragma unroll
        for (int r = 0; r < PM; ++r)
#pragma unroll
            for (int c = 0; c < PN; ++c)
                acc[r][c] = fma(a[r], b[c], acc[r][c]);
    }
#pragma unroll
    for (int r = 0; r < PM; ++r) {
#pragma unroll
        for (int c = 0; c < PN; ++c) {
            const float8 v = acc[r][c];
            float s = ((v.s0 + v.s1) + (v.s2 + v.s3)) + ((v.s4 + v.s5) + (v.s6 + v.s7));
            for (int t = k; t < K; ++t)
                s = fma(rowA[r][t], rowB[c][t], s);
            if (bi + r < M && bj + c < N)
                C[(size_t)(bi + r) * ldc + bj + c] = s;
        }
    }
}

#else // GPU_STYLE

#define PTILE 16

// Local size (16, 16); global size (N, M) rounded up to multiples of 16.
__kernel void matmul_nt(int M, int N, int K, __global const float* A, ulong a_off, int lda, __global const float* B,
                        ulong b_off, int ldb, __global float* C, ulong c_off, int ldc)
{
    __local float As[PTILE][PTILE + 1];
    __local float Bs[PTILE][PTILE + 1];
    A += a_off;
    B += b_off;
    C += c_off;
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int col = get_group_id(0) * PTILE + tx, row = get_group_id(1) * PTILE + ty;
    const int bRow = get_group_id(0) * PTILE + ty;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += PTILE) {
        As[ty][tx] = row < M && k0 + tx < K ? A[(size_t)row * lda + k0 + tx] : 0.0f;
        Bs[ty][tx] = bRow < N && k0 + tx < K ? B[(size_t)bRow * ldb + k0 + tx] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < PTILE; ++t)
            acc = fma(As[ty][t], Bs[tx][t], acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[(size_t)row * ldc + col] = acc;
}

#endif

// --- element-wise ----------------------------------------------------------------------------------

// out[r][c] += bias[c] over rows x cols (row stride ld).
__kernel void add_bias(__global float* out, int rows, int cols, int ld, __global const float* bias)
{
    const size_t i = get_global_id(0);
    if (i >= (size_t)rows * cols)
        return;
    const int r = (int)(i / cols), c = (int)(i % cols);
    out[(size_t)r * ld + c] += bias[c];
}

// x += t (the residual stream), n values.
__kernel void add_into(__global float* x, __global const float* t, int n)
{
    const int i = get_global_id(0);
    if (i < n)
        x[i] += t[i];
}

// SwiGLU: act[r][c] = silu(gate) * up, gate = mlp[r][c], up = mlp[r][inter + c], silu(g) = g / (1 + e^-g).
__kernel void swiglu(__global const float* mlp, int rows, int inter, __global float* act)
{
    const size_t i = get_global_id(0);
    if (i >= (size_t)rows * inter)
        return;
    const size_t r = i / inter, c = i % inter;
    const float g = mlp[r * 2 * inter + c], u = mlp[r * 2 * inter + inter + c];
    act[i] = g / (1.0f + exp(-g)) * u;
}

// GPT-2's gelu_new: 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))).
__kernel void gelu_tanh(__global const float* mlp, int n, __global float* act)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const float u = mlp[i];
    const float kC = 0.7978845608028654f;
    act[i] = 0.5f * u * (1.0f + tanh(kC * (u + 0.044715f * u * u * u)));
}

// --- norms ---------------------------------------------------------------------------------------------
// Rows first .. first + rows - 1 of x (cols wide) into out rows 0 .. rows - 1. RMSNorm:
// x / sqrt(mean(x^2) + eps) w; LayerNorm (layer = 1): (x - mean) / sqrt(var + eps) w + b.

#ifndef GPU_STYLE

// One work-item per row; global size rows.
__kernel void norm_rows(__global const float* x, int first, int rows, int cols, __global const float* w,
                        __global const float* b, int layer, float eps, __global float* out)
{
    const int r = get_global_id(0);
    if (r >= rows)
        return;
    const __global float* v = x + (size_t)(first + r) * cols;
    __global float* o = out + (size_t)r * cols;
    const float d = (float)cols;
    float mean = 0.0f;
    if (layer) {
        float s = 0.0f;
        for (int c = 0; c < cols; ++c)
            s += v[c];
        mean = s / d;
    }
    float ss = 0.0f;
    for (int c = 0; c < cols; ++c) {
        const float u = v[c] - mean;
        ss += u * u;
    }
    const float inv = 1.0f / sqrt(ss / d + eps);
    for (int c = 0; c < cols; ++c)
        o[c] = layer ? ((v[c] - mean) * inv) * w[c] + b[c] : (v[c] * inv) * w[c];
}

#else // GPU_STYLE

// Sums of a row's values across the work-group (NORM_GROUP work-items, a power of two).
inline float group_sum(float value, __local float* scratch)
{
    const int l = get_local_id(0);
    scratch[l] = value;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = NORM_GROUP / 2; s > 0; s >>= 1) {
        if (l < s)
            scratch[l] += scratch[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float total = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}

// One work-group of NORM_GROUP work-items per row; global size exactly rows * NORM_GROUP (every
// work-item reaches every barrier: no early return, no barrier under a branch).
__kernel void norm_rows(__global const float* x, int first, int rows, int cols, __global const float* w,
                        __global const float* b, int layer, float eps, __global float* out)
{
    __local float scratch[NORM_GROUP];
    const int r = get_group_id(0), l = get_local_id(0);
    const __global float* v = x + (size_t)(first + r) * cols;
    __global float* o = out + (size_t)r * cols;
    const float d = (float)cols;
    float s = 0.0f;
    for (int c = l; c < cols; c += NORM_GROUP)
        s += v[c];
    const float total = group_sum(s, scratch);
    const float mean = layer ? total / d : 0.0f;
    float ss = 0.0f;
    for (int c = l; c < cols; c += NORM_GROUP) {
        const float u = v[c] - mean;
        ss += u * u;
    }
    const float inv = 1.0f / sqrt(group_sum(ss, scratch) / d + eps);
    for (int c = l; c < cols; c += NORM_GROUP)
        o[c] = layer ? ((v[c] - mean) * inv) * w[c] + b[c] : (v[c] * inv) * w[c];
}

#endif

// --- RoPE ------------------------------------------------------------------------------------------------
// Hugging Face's rotate_half on the first `heads` head blocks of every row of qkv (ld wide): dimension i
// paired with i + pairs (pairs = head_dim / 2); cos/sin tables [rows x pairs], computed on the host in
// double. Global size (heads, rows) on CPUs (a work-item rotates a head), (heads * pairs, rows) on GPUs.

__kernel void rope(__global float* qkv, int rows, int ld, int heads, int pairs, __global const float* cos_t,
                   __global const float* sin_t)
{
    const int t = get_global_id(1);
#ifdef GPU_STYLE
    const int h = get_global_id(0) / pairs, i0 = get_global_id(0) % pairs, i1 = i0 + 1;
#else
    const int h = get_global_id(0), i0 = 0, i1 = pairs;
#endif
    if (t >= rows || h >= heads)
        return;
    __global float* x = qkv + (size_t)t * ld + (size_t)h * 2 * pairs;
    const __global float* c = cos_t + (size_t)t * pairs;
    const __global float* s = sin_t + (size_t)t * pairs;
    for (int i = i0; i < i1; ++i) {
        const float a = x[i], b = x[i + pairs];
        x[i] = a * c[i] - b * s[i];
        x[i + pairs] = b * c[i] + a * s[i];
    }
}

// --- llama.cpp's query conversion ------------------------------------------------------------------------
// Query rows converted as ggml's x86 converter stores them, dequantized (core/io/ggml_dot.h
// convertQueryRow): per KV head g the type types[g] (0: float32 as is, 1: q8_0 / q8_1, whose values
// are the same q_j fp16(d), 2: f16, 3: bf16). Out: rows x heads * head_dim. Global size
// (heads * ceil(head_dim / 32), rows): a work-item converts one 32-value block of a head's row.

inline float round_to_half_inf(float v)
{
    return fabs(v) >= 65520.0f ? copysign(INFINITY, v) : round_to_half(v);
}

__kernel void convert_queries(__global const float* qkv, int ld, int rows, int heads, int group, int head_dim,
                              __global const int* types, __global float* out)
{
    const int blocks = (head_dim + 31) / 32;
    const int t = get_global_id(1), h = get_global_id(0) / blocks, blk = get_global_id(0) % blocks;
    if (t >= rows || h >= heads)
        return;
    const int type = types[h / group];
    const int c0 = blk * 32, c1 = min(head_dim, c0 + 32);
    const __global float* q = qkv + (size_t)t * ld + (size_t)h * head_dim;
    __global float* o = out + (size_t)t * heads * head_dim + (size_t)h * head_dim;
    if (type == 1 && c1 - c0 == 32) {
        float amax = 0.0f;
        for (int j = c0; j < c1; ++j)
            amax = fmax(amax, fabs(q[j]));
        const float d = amax / 127.0f;
        const float dh = round_to_half_inf(d);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int j = c0; j < c1; ++j) {
            const float product = q[j] * id;
            // _mm256_round_ps (nearest even), cvtps (a non-finite or huge lane: INT_MIN), packs (saturate).
            const float rounded = rint(product);
            const int code = isfinite(rounded) && fabs(rounded) < 2147483648.0f ? clamp((int)rounded, -128, 127) : -128;
            o[j] = (float)code * dh;
        }
        return;
    }
    for (int j = c0; j < c1; ++j)
        o[j] = type == 2 ? round_to_half_inf(q[j]) : type == 3 ? store_scalar(q[j], FORMAT_BF16) : q[j];
}

// --- attention ---------------------------------------------------------------------------------------------
// Query heads h0 .. h0 + hg - 1 (local index hl) of a chunk of T tokens. qkv: the layer's fused
// projection (ld_qkv wide): query head h at column h head_dim, key head g at (heads + g) head_dim,
// value head g at (heads + kv_heads + g) head_dim; kvh: the cache's khat (column g head_dim) and vhat
// (column (kv_heads + g) head_dim), ld_kvh wide; qc: the converted queries (heads head_dim wide).
// Query t reads keys [lo(t), t], lo(t) = t - window + 1 with a sliding window; with the cache hooked
// (hooked = 1) key j is read from khat with the converted query when j < cache_end(t, group_k) and
// value j from vhat when j < cache_end(t, group_v) (core/lm's cachedKeys), else exactly.
// Scores are [hg x T x T]: entry (hl, t, j) at (hl T + t) T + j.

inline int window_start(int t, int window)
{
    return window > 0 ? max(0, t - window + 1) : 0;
}

inline int cache_end(int t, int group, int residual)
{
    int end = group > 1 ? group * ((t + 1) / group) : t + 1;
    if (residual > 0 && t - residual + 1 < end)
        end = t - residual + 1;
    return max(end, 0);
}

inline float dot_rows(const __global float* a, const __global float* b, int n)
{
    float8 acc = (float8)(0.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        acc = fma(vload8(0, a + i), vload8(0, b + i), acc);
    float s = ((acc.s0 + acc.s1) + (acc.s2 + acc.s3)) + ((acc.s4 + acc.s5) + (acc.s6 + acc.s7));
    for (; i < n; ++i)
        s = fma(a[i], b[i], s);
    return s;
}

#define ATT_TQ 4
#define ATT_TK 4

#ifndef GPU_STYLE

// dots[r][c] = a_r . b_c for the ATT_TQ rows of A from row t0 and the ATT_TK rows of B from row j0
// (rows past `ta` or `tb` read the block's first row: valid memory, never used), in float8 lanes.
inline void block_dots(const __global float* a, size_t lda, int t0, int ta, const __global float* b, size_t ldb,
                       int j0, int tb, int n, float dots[ATT_TQ][ATT_TK])
{
    const __global float* ra[ATT_TQ];
    const __global float* rb[ATT_TK];
    float8 acc[ATT_TQ][ATT_TK];
#pragma unroll
    for (int r = 0; r < ATT_TQ; ++r)
        ra[r] = a + (size_t)(t0 + r < ta ? t0 + r : t0) * lda;
#pragma unroll
    for (int c = 0; c < ATT_TK; ++c)
        rb[c] = b + (size_t)(j0 + c < tb ? j0 + c : j0) * ldb;
#pragma unroll
    for (int r = 0; r < ATT_TQ; ++r)
#pragma unroll
        for (int c = 0; c < ATT_TK; ++c)
            acc[r][c] = (float8)(0.0f);
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        float8 x[ATT_TQ], y[ATT_TK];
#pragma unroll
        for (int r = 0; r < ATT_TQ; ++r)
            x[r] = vload8(0, ra[r] + k);
#pragma unroll
        for (int c = 0; c < ATT_TK; ++c)
            y[c] = vload8(0, rb[c] + k);
#pragma unroll
        for (int r = 0; r < ATT_TQ; ++r)
#pragma unroll
            for (int c = 0; c < ATT_TK; ++c)
                acc[r][c] = fma(x[r], y[c], acc[r][c]);
    }
#pragma unroll
    for (int r = 0; r < ATT_TQ; ++r)
#pragma unroll
        for (int c = 0; c < ATT_TK; ++c) {
            const float8 v = acc[r][c];
            float s = ((v.s0 + v.s1) + (v.s2 + v.s3)) + ((v.s4 + v.s5) + (v.s6 + v.s7));
            for (int i = k; i < n; ++i)
                s = fma(ra[r][i], rb[c][i], s);
            dots[r][c] = s;
        }
}

#endif

// Scores s_tj = (q_t . k_j) scale over the keys each query reads; with `want_exact` also the exact
// scores (the exact query against the exact keys) into se, for the damage. CPU style: global size
// (ceil(T / ATT_TK), ceil(T / ATT_TQ), hg), a block of ATT_TQ queries x ATT_TK keys per work-item,
// its exact and cached products each computed only when a pair of the block needs it. GPU style:
// global size (T, T, hg), a work-item per (key, query).
__kernel void attention_scores(int T, int head_dim, int h0, int heads, int kv_heads, __global const float* qkv,
                               int ld_qkv, __global const float* qc, int ld_qc, __global const float* kvh, int ld_kvh,
                               int hooked, int group_k, int residual, int window, float scale, __global float* s,
                               __global float* se, int want_exact)
{
    const int hl = get_global_id(2), h = h0 + hl, g = h / (heads / kv_heads);
    __global float* srow = s + (size_t)hl * T * T;
    __global float* serow = se + (size_t)hl * T * T;
    const __global float* q = qkv + (size_t)h * head_dim;
    const __global float* k = qkv + (size_t)(heads + g) * head_dim;
    const __global float* qh = qc + (size_t)h * head_dim;
    const __global float* kh = kvh + (size_t)g * head_dim;
#ifdef GPU_STYLE
    const int j = get_global_id(0), t = get_global_id(1);
    if (t >= T || j > t || j < window_start(t, window))
        return;
    const bool cached = hooked && j < cache_end(t, group_k, residual);
    float exact = 0.0f;
    if (!cached || want_exact)
        exact = dot_rows(q + (size_t)t * ld_qkv, k + (size_t)j * ld_qkv, head_dim) * scale;
    srow[(size_t)t * T + j] = cached ? dot_rows(qh + (size_t)t * ld_qc, kh + (size_t)j * ld_kvh, head_dim) * scale : exact;
    if (want_exact)
        serow[(size_t)t * T + j] = exact;
#else
    const int j0 = get_global_id(0) * ATT_TK, t0 = get_global_id(1) * ATT_TQ;
    if (t0 >= T || j0 >= T)
        return;
    const int t1 = min(T, t0 + ATT_TQ), j1 = min(T, j0 + ATT_TK);
    if (j0 > t1 - 1 || j1 - 1 < window_start(t0, window))
        return; // every pair of the block is masked
    bool need_exact = false, need_cache = false;
    for (int t = t0; t < t1; ++t) {
        const int lo = window_start(t, window), end = hooked ? cache_end(t, group_k, residual) : 0;
        for (int j = j0; j < j1; ++j)
            if (j <= t && j >= lo) {
                need_exact = need_exact || want_exact || j >= end;
                need_cache = need_cache || j < end;
            }
    }
    float e[ATT_TQ][ATT_TK], c[ATT_TQ][ATT_TK];
    if (need_exact)
        block_dots(q, ld_qkv, t0, T, k, ld_qkv, j0, T, head_dim, e);
    if (need_cache)
        block_dots(qh, ld_qc, t0, T, kh, ld_kvh, j0, T, head_dim, c);
    for (int t = t0; t < t1; ++t) {
        const int lo = window_start(t, window), end = hooked ? cache_end(t, group_k, residual) : 0;
        for (int j = j0; j < j1; ++j) {
            if (j > t || j < lo)
                continue;
            const float exact = need_exact ? e[t - t0][j - j0] * scale : 0.0f;
            srow[(size_t)t * T + j] = j < end ? c[t - t0][j - j0] * scale : exact;
            if (want_exact)
                serow[(size_t)t * T + j] = exact;
        }
    }
#endif
}

// Softmax of each row (hl, t) of s over keys [lo(t), t] into p, every other entry of p's row 0
// (the values kernel reads whole rows). One work-item per row; global size hg * T.
__kernel void attention_softmax(int T, int rows, int window, __global const float* s, __global float* p)
{
    const int row = get_global_id(0);
    if (row >= rows)
        return;
    const int t = row % T, lo = window_start(t, window);
    const __global float* x = s + (size_t)row * T;
    __global float* y = p + (size_t)row * T;
    float m = x[lo];
    for (int j = lo + 1; j <= t; ++j)
        m = fmax(m, x[j]);
    float sum = 0.0f;
    for (int j = lo; j <= t; ++j) {
        const float e = exp(x[j] - m);
        y[j] = e;
        sum += e;
    }
    for (int j = lo; j <= t; ++j)
        y[j] = y[j] / sum;
    for (int j = 0; j < lo; ++j)
        y[j] = 0.0f;
    for (int j = t + 1; j < T; ++j)
        y[j] = 0.0f;
}

// out (T x heads head_dim, columns of heads h0 ..) = p v, value j read from vhat where
// j < cache_end(t, group_v) (hooked), else exactly. CPU style: global (ceil(head_dim / 8),
// ceil(T / ATT_TQ), hg), a block of ATT_TQ rows x 8 columns; GPU style: global (head_dim, T, hg).
__kernel void attention_values(int T, int head_dim, int h0, int heads, int kv_heads, __global const float* p,
                               __global const float* qkv, int ld_qkv, __global const float* kvh, int ld_kvh,
                               int hooked, int group_v, int residual, int window, __global float* out)
{
    const int hl = get_global_id(2), h = h0 + hl, g = h / (heads / kv_heads);
    const __global float* prow = p + (size_t)hl * T * T;
    const __global float* v = qkv + (size_t)(heads + kv_heads + g) * head_dim;
    const __global float* vh = kvh + (size_t)(kv_heads + g) * head_dim;
    const int ld_out = heads * head_dim;
#ifdef GPU_STYLE
    const int c = get_global_id(0), t = get_global_id(1);
    if (c >= head_dim || t >= T)
        return;
    const int end = hooked ? cache_end(t, group_v, residual) : 0;
    float acc = 0.0f;
    for (int j = window_start(t, window); j <= t; ++j)
        acc = fma(prow[(size_t)t * T + j], j < end ? vh[(size_t)j * ld_kvh + c] : v[(size_t)j * ld_qkv + c], acc);
    out[(size_t)t * ld_out + (size_t)h * head_dim + c] = acc;
#else
    const int c0 = get_global_id(0) * 8, t0 = get_global_id(1) * ATT_TQ;
    if (c0 >= head_dim || t0 >= T)
        return;
    const int t1 = min(T, t0 + ATT_TQ);
    int ends[ATT_TQ];
    float8 acc[ATT_TQ];
#pragma unroll
    for (int r = 0; r < ATT_TQ; ++r) {
        ends[r] = hooked && t0 + r < t1 ? cache_end(t0 + r, group_v, residual) : 0;
        acc[r] = (float8)(0.0f);
    }
    const bool full = c0 + 8 <= head_dim;
    for (int j = window_start(t0, window); j < t1; ++j) {
        float8 ve, vc;
        if (full) {
            ve = vload8(0, v + (size_t)j * ld_qkv + c0);
            vc = hooked ? vload8(0, vh + (size_t)j * ld_kvh + c0) : ve;
        } else {
            float a[8], b[8];
            for (int c = 0; c < 8; ++c) {
                a[c] = c0 + c < head_dim ? v[(size_t)j * ld_qkv + c0 + c] : 0.0f;
                b[c] = hooked && c0 + c < head_dim ? vh[(size_t)j * ld_kvh + c0 + c] : a[c];
            }
            ve = vload8(0, a);
            vc = vload8(0, b);
        }
#pragma unroll
        for (int r = 0; r < ATT_TQ; ++r)
            if (t0 + r < t1)
                acc[r] = fma((float8)(prow[(size_t)(t0 + r) * T + j]), j < ends[r] ? vc : ve, acc[r]);
    }
    for (int r = 0; r < ATT_TQ && t0 + r < t1; ++r) {
        __global float* o = out + (size_t)(t0 + r) * ld_out + (size_t)h * head_dim + c0;
        if (full) {
            vstore8(acc[r], 0, o);
        } else {
            float a[8];
            vstore8(acc[r], 0, a);
            for (int c = 0; c < 8 && c0 + c < head_dim; ++c)
                o[c] = a[c];
        }
    }
#endif
}

// The oracle damage of queries t >= start of heads h0 .. (core/lm/transformer.cpp oracleDamage): p the
// exact softmax (pe), delta_j = s_tj - se_tj (the scores the pass used minus the exact ones), m1 =
// sum p delta, m2 = sum p delta^2; KL(p || p^) = log sum_j p_j exp(delta_j - m1), with float expm1
// while every shift is below 30; Fisher m2 - m1^2; A^2 = sum_{j < cache_end(t, group_v)} p_j^2
// value_err_j / ||o||^2 and ||o - o^||^2 / ||o||^2, o the exact output (oe), o^ the pass's (out).
// Written at ((layer heads + h) count + t - start) of kl, fisher, a2, out_err. One work-item per
// query; global size (T - start, hg).
__kernel void attention_damage(int T, int start, int head_dim, int h0, int heads, int kv_heads, int layer,
                               __global const float* s, __global const float* se, __global const float* pe,
                               __global const float* oe, __global const float* out, __global const acc_t* value_err,
                               int group_v, int residual, int window, __global float* kl, __global float* fisher,
                               __global float* a2, __global float* out_err)
{
    const int i = get_global_id(0), hl = get_global_id(1);
    const int t = start + i, h = h0 + hl, g = h / (heads / kv_heads);
    if (t >= T)
        return;
    const size_t row = ((size_t)hl * T + t) * T;
    const int lo = window_start(t, window);
    acc_t m1 = 0, m2 = 0;
    float largest = 0.0f;
    for (int j = lo; j <= t; ++j) {
        const acc_t p = pe[row + j], delta = (acc_t)s[row + j] - (acc_t)se[row + j];
        m1 += p * delta;
        m2 += p * delta * delta;
    }
    for (int j = lo; j <= t; ++j)
        largest = fmax(largest, (float)fabs((acc_t)s[row + j] - (acc_t)se[row + j] - m1));
    acc_t sum = 0;
    if (largest < 30.0f) {
        for (int j = lo; j <= t; ++j)
            sum += (acc_t)pe[row + j] * (acc_t)expm1((float)((acc_t)s[row + j] - (acc_t)se[row + j] - m1));
        sum = log1p(sum);
    } else {
        for (int j = lo; j <= t; ++j)
            sum += (acc_t)pe[row + j] * exp((acc_t)s[row + j] - (acc_t)se[row + j] - m1);
        sum = log(sum);
    }
    const int end_v = cache_end(t, group_v, residual);
    acc_t a2sum = 0;
    for (int j = lo; j < end_v && j <= t; ++j) {
        const acc_t p = pe[row + j];
        a2sum += p * p * value_err[(size_t)g * T + j];
    }
    const int ld = heads * head_dim;
    acc_t energy = 0, err = 0;
    for (int c = 0; c < head_dim; ++c) {
        const acc_t o = oe[(size_t)t * ld + (size_t)h * head_dim + c];
        const acc_t e = o - (acc_t)out[(size_t)t * ld + (size_t)h * head_dim + c];
        energy += o * o;
        err += e * e;
    }
    const size_t at = ((size_t)layer * heads + h) * (size_t)(T - start) + i;
    kl[at] = (float)fmax((acc_t)0, sum);
    fisher[at] = (float)fmax((acc_t)0, m2 - m1 * m1);
    a2[at] = energy > 0 ? (float)(a2sum / energy) : NAN;
    out_err[at] = energy > 0 ? (float)(err / energy) : NAN;
}
