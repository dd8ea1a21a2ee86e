// SPDX-License-Identifier: GPL-3.0-or-later
// Randomized WHT rotation, fused rotate + normalize + codebook encode, decode, inverse rotation.
//
// DIM (the stored dimension: the WHT's power of two, or d without rotation) is a build option.
// CPU devices run one work-item per vector with the vector in private memory (measured 40x
// faster than a work-group per vector on PoCL); GPUs (-DGPU_STYLE) run a work-group per
// vector with the vector in local memory. Both reproduce the CPU oracle's arithmetic order,
// so codes match it bit for bit.

// In-place unnormalised fast Walsh-Hadamard transform of v[0..DIM), same butterflies as
// core/quant/wht.cpp (the stage order does not change any value).
inline void fwht_private(float* v)
{
    for (int h = 1; h < DIM; h <<= 1)
        for (int i = 0; i < DIM; i += 2 * h)
            for (int j = i; j < i + h; ++j) {
                const float a = v[j], b = v[j + h];
                v[j] = a + b;
                v[j + h] = a - b;
            }
}

// Squared norm with eight lane accumulators combined pairwise, the CPU oracle's order.
inline float norm2_lanes(const float* v, int n)
{
    float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f, p4 = 0.0f, p5 = 0.0f, p6 = 0.0f, p7 = 0.0f;
    const int blocks = n / 8;
    for (int b = 0; b < blocks; ++b) {
        const float* w = v + 8 * b;
        p0 += w[0] * w[0];
        p1 += w[1] * w[1];
        p2 += w[2] * w[2];
        p3 += w[3] * w[3];
        p4 += w[4] * w[4];
        p5 += w[5] * w[5];
        p6 += w[6] * w[6];
        p7 += w[7] * w[7];
    }
    float total = ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7));
    for (int c = 8 * blocks; c < n; ++c)
        total += v[c] * v[c];
    return total;
}

// The code of u: how many thresholds lie strictly below it.
inline uchar code_of(float u, __constant const float* thresholds, int count)
{
    int k = 0;
    for (int t = 0; t < count; ++t)
        k += u > thresholds[t] ? 1 : 0;
    return (uchar)k;
}

#if !defined(GPU_STYLE) && DIM % 8 == 0

// CPU style, DIM a multiple of 8: each work-item keeps its vector as float8 registers/stack,
// the WHT's first three stages are lane shuffles (as in core/quant/wht.cpp), the rest whole
// float8 butterflies; norms accumulate in eight lanes and combine pairwise, and codes come
// from float8 compare-and-count. Same arithmetic as the CPU oracle, in explicit vectors
// (PERF-NOTES: per-work-item explicit vectors were what PoCL ran fast).

inline void fwht8(float8* v)
{
    const float8 s1 = (float8)(1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f);
    const float8 s2 = (float8)(1.0f, 1.0f, -1.0f, -1.0f, 1.0f, 1.0f, -1.0f, -1.0f);
    const float8 s4 = (float8)(1.0f, 1.0f, 1.0f, 1.0f, -1.0f, -1.0f, -1.0f, -1.0f);
    for (int b = 0; b < DIM / 8; ++b) {
        float8 x = v[b];
        x = shuffle(x, (uint8)(0, 0, 2, 2, 4, 4, 6, 6)) + s1 * shuffle(x, (uint8)(1, 1, 3, 3, 5, 5, 7, 7));
        x = shuffle(x, (uint8)(0, 1, 0, 1, 4, 5, 4, 5)) + s2 * shuffle(x, (uint8)(2, 3, 2, 3, 6, 7, 6, 7));
        x = shuffle(x, (uint8)(0, 1, 2, 3, 0, 1, 2, 3)) + s4 * shuffle(x, (uint8)(4, 5, 6, 7, 4, 5, 6, 7));
        v[b] = x;
    }
    for (int h = 1; h < DIM / 8; h <<= 1)
        for (int i = 0; i < DIM / 8; i += 2 * h)
            for (int j = i; j < i + h; ++j) {
                const float8 a = v[j], c = v[j + h];
                v[j] = a + c;
                v[j + h] = a - c;
            }
}

// v = H D [x_r, 0] / sqrt(DIM) (when rotate) or x_r itself, as float8 blocks.
inline void load_row(float8* v, __global const float* x, int r, int d, int rotate, __global const float* signs,
                     float scale)
{
    __global const float* row = x + (size_t)r * d;
    if (!rotate) {
        for (int b = 0; b < DIM / 8; ++b)
            v[b] = vload8(b, row);
        return;
    }
    const int full = d / 8;
    for (int b = 0; b < full; ++b)
        v[b] = vload8(b, row) * vload8(b, signs) * scale;
    for (int b = full; b < DIM / 8; ++b) {
        float lanes[8];
        for (int l = 0; l < 8; ++l) {
            const int j = 8 * b + l;
            lanes[l] = j < d ? row[j] * signs[j] * scale : 0.0f;
        }
        v[b] = vload8(0, lanes);
    }
    fwht8(v);
}

__kernel void rotate_rows(__global const float* x, int rows, int d, __global const float* signs, float scale,
                          __global float* rotated)
{
    const int r = get_global_id(0);
    if (r >= rows)
        return;
    float8 v[DIM / 8];
    load_row(v, x, r, d, 1, signs, scale);
    for (int b = 0; b < DIM / 8; ++b)
        vstore8(v[b], b, rotated + (size_t)r * DIM);
}

__kernel void encode_rows(__global const float* x, int rows, int d, int rotate, __global const float* signs,
                          float scale, __constant const float* thresholds, int threshold_count, int format,
                          __global uchar* codes, __global float* norms, int keep_rotated, __global float* rotated)
{
    const int r = get_global_id(0);
    if (r >= rows)
        return;
    float8 v[DIM / 8];
    load_row(v, x, r, d, rotate, signs, scale);
    float8 partial = (float8)(0.0f);
    for (int b = 0; b < DIM / 8; ++b)
        partial += v[b] * v[b];
    const float total = ((partial.s0 + partial.s1) + (partial.s2 + partial.s3))
                        + ((partial.s4 + partial.s5) + (partial.s6 + partial.s7));
    const float norm = sqrt(total);
    norms[r] = store_scalar(norm, format);
    const float inv = norm > 0.0f ? 1.0f / norm : 0.0f;
    for (int b = 0; b < DIM / 8; ++b) {
        const float8 u = v[b] * inv;
        int8 k = (int8)(0);
        for (int t = 0; t < threshold_count; ++t)
            k -= isgreater(u, (float8)(thresholds[t])); // -1 where true
        vstore8(convert_uchar8(k), b, codes + (size_t)r * DIM);
        if (keep_rotated)
            vstore8(v[b], b, rotated + (size_t)r * DIM);
    }
}

__kernel void unrotate_rows(__global const float* in, int rows, int d, __global const float* signs, float scale,
                            __global float* out)
{
    const int r = get_global_id(0);
    if (r >= rows)
        return;
    float8 v[DIM / 8];
    for (int b = 0; b < DIM / 8; ++b)
        v[b] = vload8(b, in + (size_t)r * DIM);
    fwht8(v);
    __global float* row = out + (size_t)r * d;
    const int full = d / 8;
    for (int b = 0; b < full; ++b)
        vstore8(v[b] * vload8(b, signs) * scale, b, row);
    if (full < DIM / 8 && 8 * full < d) {
        float lanes[8];
        vstore8(v[full], 0, lanes);
        for (int j = 8 * full; j < d; ++j)
            row[j] = lanes[j - 8 * full] * signs[j] * scale;
    }
}

#elif !defined(GPU_STYLE)

// CPU style for DIM not a multiple of 8 (unrotated paths of odd sizes): scalar loops.

// rotated[r] = H D [x[r], 0] / sqrt(DIM), one work-item per row (rows x d in, rows x DIM out).
__kernel void rotate_rows(__global const float* x, int rows, int d, __global const float* signs, float scale,
                          __global float* rotated)
{
    const int r = get_global_id(0);
    if (r >= rows)
        return;
    float v[DIM];
    for (int j = 0; j < d; ++j)
        v[j] = x[(size_t)r * d + j] * signs[j] * scale;
    for (int j = d; j < DIM; ++j)
        v[j] = 0.0f;
    fwht_private(v);
    for (int j = 0; j < DIM; ++j)
        rotated[(size_t)r * DIM + j] = v[j];
}

// Fused rotate (when `rotate`) + normalize + encode: codes (rows x DIM), stored norms, and the
// rotated rows when `keep_rotated` (the QJL residual needs them).
__kernel void encode_rows(__global const float* x, int rows, int d, int rotate, __global const float* signs,
                          float scale, __constant const float* thresholds, int threshold_count, int format,
                          __global uchar* codes, __global float* norms, int keep_rotated, __global float* rotated)
{
    const int r = get_global_id(0);
    if (r >= rows)
        return;
    float v[DIM];
    if (rotate) {
        for (int j = 0; j < d; ++j)
            v[j] = x[(size_t)r * d + j] * signs[j] * scale;
        for (int j = d; j < DIM; ++j)
            v[j] = 0.0f;
        fwht_private(v);
    } else {
        for (int j = 0; j < DIM; ++j)
            v[j] = x[(size_t)r * DIM + j];
    }
    const float norm = sqrt(norm2_lanes(v, DIM));
    norms[r] = store_scalar(norm, format);
    const float inv = norm > 0.0f ? 1.0f / norm : 0.0f;
    for (int c = 0; c < DIM; ++c)
        codes[(size_t)r * DIM + c] = code_of(v[c] * inv, thresholds, threshold_count);
    if (keep_rotated)
        for (int c = 0; c < DIM; ++c)
            rotated[(size_t)r * DIM + c] = v[c];
}

// out[r] = first d coordinates of D H in[r] / sqrt(DIM), one work-item per row.
__kernel void unrotate_rows(__global const float* in, int rows, int d, __global const float* signs, float scale,
                            __global float* out)
{
    const int r = get_global_id(0);
    if (r >= rows)
        return;
    float v[DIM];
    for (int j = 0; j < DIM; ++j)
        v[j] = in[(size_t)r * DIM + j];
    fwht_private(v);
    for (int j = 0; j < d; ++j)
        out[(size_t)r * d + j] = v[j] * signs[j] * scale;
}

#else // GPU_STYLE: a work-group per row, the vector in local memory

inline void fwht_local(__local float* v)
{
    const int lid = get_local_id(0), size = get_local_size(0);
    for (int h = 1; h < DIM; h <<= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int p = lid; p < DIM / 2; p += size) {
            const int block = p / h, offset = p % h;
            const int j = block * 2 * h + offset;
            const float a = v[j], b = v[j + h];
            v[j] = a + b;
            v[j + h] = a - b;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

__kernel void rotate_rows(__global const float* x, int rows, int d, __global const float* signs, float scale,
                          __global float* rotated)
{
    __local float v[DIM];
    const int r = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
    if (r >= rows)
        return;
    for (int j = lid; j < DIM; j += size)
        v[j] = j < d ? x[(size_t)r * d + j] * signs[j] * scale : 0.0f;
    fwht_local(v);
    for (int j = lid; j < DIM; j += size)
        rotated[(size_t)r * DIM + j] = v[j];
}

__kernel void encode_rows(__global const float* x, int rows, int d, int rotate, __global const float* signs,
                          float scale, __constant const float* thresholds, int threshold_count, int format,
                          __global uchar* codes, __global float* norms, int keep_rotated, __global float* rotated)
{
    __local float v[DIM];
    __local float lanes[8];
    __local float shared_norm;
    const int r = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
    if (r >= rows)
        return;
    if (rotate) {
        for (int j = lid; j < DIM; j += size)
            v[j] = j < d ? x[(size_t)r * d + j] * signs[j] * scale : 0.0f;
        fwht_local(v);
    } else {
        for (int j = lid; j < DIM; j += size)
            v[j] = x[(size_t)r * DIM + j];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    // Eight lane sums, each in block order, then combined pairwise: the oracle's order.
    if (lid < 8) {
        float p = 0.0f;
        for (int b = 0; b < DIM / 8; ++b)
            p += v[8 * b + lid] * v[8 * b + lid];
        lanes[lid] = p;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        float total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
        for (int c = 8 * (DIM / 8); c < DIM; ++c)
            total += v[c] * v[c];
        const float norm = sqrt(total);
        norms[r] = store_scalar(norm, format);
        shared_norm = norm;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const float norm = shared_norm;
    const float inv = norm > 0.0f ? 1.0f / norm : 0.0f;
    for (int c = lid; c < DIM; c += size) {
        codes[(size_t)r * DIM + c] = code_of(v[c] * inv, thresholds, threshold_count);
        if (keep_rotated)
            rotated[(size_t)r * DIM + c] = v[c];
    }
}

__kernel void unrotate_rows(__global const float* in, int rows, int d, __global const float* signs, float scale,
                            __global float* out)
{
    __local float v[DIM];
    const int r = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
    if (r >= rows)
        return;
    for (int j = lid; j < DIM; j += size)
        v[j] = in[(size_t)r * DIM + j];
    fwht_local(v);
    for (int j = lid; j < d; j += size)
        out[(size_t)r * d + j] = v[j] * signs[j] * scale;
}

#endif

// out = norm[r] * level[code], one work-item per coordinate (rows x DIM).
__kernel void decode_rows(__global const uchar* codes, __global const float* norms, __constant const float* levels,
                          int rows, __global float* out)
{
    const size_t i = get_global_id(0);
    if (i >= (size_t)rows * DIM)
        return;
    out[i] = norms[i / DIM] * levels[codes[i]];
}
