// SPDX-License-Identifier: GPL-3.0-or-later
// Dense products for scores, QJL sketches, estimates, reconstructions and P V.
//   gemm_nt: C = alpha * A * B^T   (A: M x K, B: N x K, row-major; dot products of rows)
//   gemm_nn: C = alpha * A * B     (A: M x K, B: K x N, row-major)
// CPU devices (default): each work-item owns a register block (TM x TN dot products in
// float8 lanes for gemm_nt; TM rows x two float8 column groups for gemm_nn), loops over a
// private array unrolled so nothing lives on the stack (PERF-NOTES: CPU-style kernels with
// explicit vectors were 15-400x faster on PoCL than GPU idioms). GPUs (-DGPU_STYLE): 16 x 16
// local-memory tiles, one output per work-item.

#ifndef GPU_STYLE

#define TM 4
#define TN 4

// Global size (ceil(N / TN), ceil(M / TM)).
__kernel void gemm_nt(int M, int N, int K, __global const float* A, int lda, __global const float* B, int ldb,
                      __global float* C, int ldc, float alpha)
{
    const int bj = get_global_id(0) * TN, bi = get_global_id(1) * TM;
    if (bi >= M || bj >= N)
        return;
    float8 acc[TM][TN];
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < TN; ++c)
            acc[r][c] = (float8)(0.0f);
    // Rows past the edge read row 0 (valid memory); their results are never written.
    int rowA[TM], rowB[TN];
#pragma unroll
    for (int r = 0; r < TM; ++r)
        rowA[r] = bi + r < M ? bi + r : bi;
#pragma unroll
    for (int c = 0; c < TN; ++c)
        rowB[c] = bj + c < N ? bj + c : bj;
    int k = 0;
    for (; k + 8 <= K; k += 8) {
        float8 a[TM], b[TN];
#pragma unroll
        for (int r = 0; r < TM; ++r)
            a[r] = vload8(0, A + (size_t)rowA[r] * lda + k);
#pragma unroll
        for (int c = 0; c < TN; ++c)
            b[c] = vload8(0, B + (size_t)rowB[c] * ldb + k);
#pragma unroll
        for (int r = 0; r < TM; ++r)
#pragma unroll
            for (int c = 0; c < TN; ++c)
                acc[r][c] = fma(a[r], b[c], acc[r][c]);
    }
#pragma unroll
    for (int r = 0; r < TM; ++r) {
#pragma unroll
        for (int c = 0; c < TN; ++c) {
            const float8 v = acc[r][c];
            float s = ((v.s0 + v.s1) + (v.s2 + v.s3)) + ((v.s4 + v.s5) + (v.s6 + v.s7));
            for (int t = k; t < K; ++t)
                s = fma(A[(size_t)rowA[r] * lda + t], B[(size_t)rowB[c] * ldb + t], s);
            if (bi + r < M && bj + c < N)
                C[(size_t)(bi + r) * ldc + bj + c] = alpha * s;
        }
    }
}

#define NM 4

// Global size (ceil(N / 16), ceil(M / NM)): NM rows x 16 columns per work-item.
__kernel void gemm_nn(int M, int N, int K, __global const float* A, int lda, __global const float* B, int ldb,
                      __global float* C, int ldc, float alpha)
{
    const int bj = get_global_id(0) * 16, bi = get_global_id(1) * NM;
    if (bi >= M || bj >= N)
        return;
    int rowA[NM];
#pragma unroll
    for (int r = 0; r < NM; ++r)
        rowA[r] = bi + r < M ? bi + r : bi;
    if (bj + 16 <= N) {
        float8 acc0[NM], acc1[NM];
#pragma unroll
        for (int r = 0; r < NM; ++r) {
            acc0[r] = (float8)(0.0f);
            acc1[r] = (float8)(0.0f);
        }
        for (int k = 0; k < K; ++k) {
            const float8 b0 = vload8(0, B + (size_t)k * ldb + bj);
            const float8 b1 = vload8(0, B + (size_t)k * ldb + bj + 8);
#pragma unroll
            for (int r = 0; r < NM; ++r) {
                const float8 a = (float8)(A[(size_t)rowA[r] * lda + k]);
                acc0[r] = fma(a, b0, acc0[r]);
                acc1[r] = fma(a, b1, acc1[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < NM; ++r) {
            if (bi + r < M) {
                vstore8(alpha * acc0[r], 0, C + (size_t)(bi + r) * ldc + bj);
                vstore8(alpha * acc1[r], 0, C + (size_t)(bi + r) * ldc + bj + 8);
            }
        }
    } else {
        // The ragged right edge: scalar.
        for (int r = 0; r < NM && bi + r < M; ++r)
            for (int j = bj; j < N; ++j) {
                float s = 0.0f;
                for (int k = 0; k < K; ++k)
                    s = fma(A[(size_t)(bi + r) * lda + k], B[(size_t)k * ldb + j], s);
                C[(size_t)(bi + r) * ldc + j] = alpha * s;
            }
    }
}

#else // GPU_STYLE

#define TILE 16

// Local size (16, 16); global size rounded up to multiples of 16 over (N, M).
__kernel void gemm_nt(int M, int N, int K, __global const float* A, int lda, __global const float* B, int ldb,
                      __global float* C, int ldc, float alpha)
{
    __local float As[TILE][TILE + 1];
    __local float Bs[TILE][TILE + 1];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int col = get_group_id(0) * TILE + tx, row = get_group_id(1) * TILE + ty;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int aRow = get_group_id(1) * TILE + ty, bRow = get_group_id(0) * TILE + ty;
        As[ty][tx] = aRow < M && k0 + tx < K ? A[(size_t)aRow * lda + k0 + tx] : 0.0f;
        Bs[ty][tx] = bRow < N && k0 + tx < K ? B[(size_t)bRow * ldb + k0 + tx] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < TILE; ++t)
            acc = fma(As[ty][t], Bs[tx][t], acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[(size_t)row * ldc + col] = alpha * acc;
}

__kernel void gemm_nn(int M, int N, int K, __global const float* A, int lda, __global const float* B, int ldb,
                      __global float* C, int ldc, float alpha)
{
    __local float As[TILE][TILE + 1];
    __local float Bs[TILE][TILE + 1];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int col = get_group_id(0) * TILE + tx, row = get_group_id(1) * TILE + ty;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = row < M && k0 + tx < K ? A[(size_t)row * lda + k0 + tx] : 0.0f;
        Bs[ty][tx] = k0 + ty < K && col < N ? B[(size_t)(k0 + ty) * ldb + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < TILE; ++t)
            acc = fma(As[ty][t], Bs[t][tx], acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[(size_t)row * ldc + col] = alpha * acc;
}

#endif

// dst (cols x rows) = src (rows x cols)^T, one element per work-item, global (cols, rows).
// Used to turn A B with a long inner dimension into gemm_nt, whose operands are both read
// along rows (P V with many tokens: the streaming form re-read B once per row block).
__kernel void transpose(__global const float* src, int rows, int cols, __global float* dst)
{
    const int c = get_global_id(0), r = get_global_id(1);
    if (r < rows && c < cols)
        dst[(size_t)c * rows + r] = src[(size_t)r * cols + c];
}
