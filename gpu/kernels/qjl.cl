// SPDX-License-Identifier: GPL-3.0-or-later
// Element-wise primitives and the QJL helpers around the products of gemm.cl: residuals, residual norms, sign packing and
// the scaled additions of the estimator and of the reconstruction (element-wise, so they
// round exactly as the CPU oracle's scaling does).

// r = a - b, element-wise over `count` values.
__kernel void subtract(__global const float* a, __global const float* b, __global float* r, int count)
{
    const int i = get_global_id(0);
    if (i < count)
        r[i] = a[i] - b[i];
}

// Stored norm of every row of x (rows x cols).
__kernel void row_norms(__global const float* x, int rows, int cols, int format, __global float* norms)
{
    const int r = get_global_id(0);
    if (r >= rows)
        return;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c)
        s = fma(x[(size_t)r * cols + c], x[(size_t)r * cols + c], s);
    norms[r] = store_scalar(sqrt(s), format);
}

// The projections P = R S^T (rows x m) become sign bits (bit set = negative; words of 32,
// little-endian) and +-1 floats in place. One work-item per (row, word).
__kernel void pack_signs(__global float* projections, int rows, int m, int words, __global uint* bits)
{
    const int w = get_global_id(0), r = get_global_id(1);
    if (w >= words || r >= rows)
        return;
    uint word = 0;
    const int end = min(32, m - 32 * w);
    for (int i = 0; i < end; ++i) {
        __global float* p = projections + (size_t)r * m + 32 * w + i;
        const bool negative = *p < 0.0f;
        word |= (negative ? 1u : 0u) << i;
        *p = negative ? -1.0f : 1.0f;
    }
    bits[(size_t)r * words + w] = word;
}

// dst[i][j] += factor * (src[i][j] * (c * norms[j])): the QJL inner-product term added to
// the scores (columns are keys).
__kernel void add_scaled_columns(__global float* dst, __global const float* src, __global const float* norms, float c,
                                 float factor, int rows, int cols)
{
    const int j = get_global_id(0), i = get_global_id(1);
    if (i >= rows || j >= cols)
        return;
    const size_t at = (size_t)i * cols + j;
    dst[at] = dst[at] + factor * (src[at] * (c * norms[j]));
}

// dst[i][j] += src[i][j] * (c * norms[i]): the reconstructed residual added to the rows.
__kernel void add_scaled_rows(__global float* dst, __global const float* src, __global const float* norms, float c,
                              int rows, int cols)
{
    const int j = get_global_id(0), i = get_global_id(1);
    if (i >= rows || j >= cols)
        return;
    const size_t at = (size_t)i * cols + j;
    dst[at] = dst[at] + src[at] * (c * norms[i]);
}

// a[i] += s * b[i] (the engine's axpy).
__kernel void axpy(__global float* a, __global const float* b, float s, int count)
{
    const int i = get_global_id(0);
    if (i < count)
        a[i] = a[i] + s * b[i];
}

// a[i] *= s.
__kernel void scale_values(__global float* a, float s, int count)
{
    const int i = get_global_id(0);
    if (i < count)
        a[i] = a[i] * s;
}

// dst[i][j] = src[i][j] * (c * norms[i]): the QJL reconstruction sqrt(pi/2)/m |r_i| (sign(S r_i) S)_j.
__kernel void scale_rows(__global float* dst, __global const float* src, __global const float* norms, float c, int rows,
                         int cols)
{
    const int j = get_global_id(0), i = get_global_id(1);
    if (i >= rows || j >= cols)
        return;
    const size_t at = (size_t)i * cols + j;
    dst[at] = src[at] * (c * norms[i]);
}

// dst[i][j] = src[i][j] * (c * norms[j]): the QJL inner-product estimate (columns are keys).
__kernel void scale_columns(__global float* dst, __global const float* src, __global const float* norms, float c,
                            int rows, int cols)
{
    const int j = get_global_id(0), i = get_global_id(1);
    if (i >= rows || j >= cols)
        return;
    const size_t at = (size_t)i * cols + j;
    dst[at] = src[at] * (c * norms[j]);
}
