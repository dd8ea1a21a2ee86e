// SPDX-License-Identifier: GPL-3.0-or-later
// Stable softmax with log-sum-exp, and the per-query metric reductions (KL, Fisher score
// error, A^2 value error, entropy, argmax shift, top-k recall) so only small results return.

// One work-item per row: p = exp(s - max) / sum, lse = max + log(sum) (sum in acc_t).
__kernel void softmax_rows(__global const float* scores, int rows, int cols, __global float* probs,
                           __global acc_t* lse)
{
    const int r = get_global_id(0);
    if (r >= rows)
        return;
    __global const float* s = scores + (size_t)r * cols;
    __global float* p = probs + (size_t)r * cols;
    float maximum = s[0];
    for (int j = 1; j < cols; ++j)
        maximum = fmax(maximum, s[j]);
    acc_t sum = 0;
    for (int j = 0; j < cols; ++j) {
        const float e = exp(s[j] - maximum);
        p[j] = e;
        sum += e;
    }
    const float inv = (float)(1.0 / sum);
    for (int j = 0; j < cols; ++j)
        p[j] *= inv;
    lse[r] = maximum + log(sum);
}

#define MAX_TOP_K 64

// Keeps best[0..k) sorted by value (descending), ties by lower index: insertion of token j.
inline void top_k_insert(float v, int j, int k, int* filled, float* values, int* best)
{
    if (*filled == k && !(v > values[k - 1]))
        return;
    int pos = *filled < k ? (*filled)++ : k - 1;
    while (pos > 0 && v > values[pos - 1]) {
        values[pos] = values[pos - 1];
        best[pos] = best[pos - 1];
        --pos;
    }
    values[pos] = v;
    best[pos] = j;
}

// One work-item per query. top_k <= MAX_TOP_K (the host computes recall itself otherwise,
// and passes top_k = 0).
__kernel void query_metrics(__global const float* s, __global const float* p, __global const acc_t* lse,
                            __global const float* sh, __global const float* ph, __global const acc_t* lse_hat,
                            __global const float* value_error2, int queries, int n, int top_k, __global float* kl,
                            __global float* fisher, __global float* a2, __global float* entropy,
                            __global uchar* argmax_shift, __global float* recall)
{
    const int q = get_global_id(0);
    if (q >= queries)
        return;
    const size_t base = (size_t)q * n;
    acc_t p_delta = 0, p_delta2 = 0, ps = 0, a2sum = 0;
    int argmax = 0, argmax_hat = 0;
    float values[MAX_TOP_K], values_hat[MAX_TOP_K];
    int best[MAX_TOP_K], best_hat[MAX_TOP_K];
    int filled = 0, filled_hat = 0;
    for (int j = 0; j < n; ++j) {
        const acc_t pj = p[base + j];
        const acc_t delta = (acc_t)sh[base + j] - (acc_t)s[base + j];
        p_delta += pj * delta;
        p_delta2 += pj * delta * delta;
        ps += pj * (acc_t)s[base + j];
        a2sum += pj * pj * (acc_t)value_error2[j];
        if (p[base + j] > p[base + argmax])
            argmax = j;
        if (ph[base + j] > ph[base + argmax_hat])
            argmax_hat = j;
        if (top_k > 0) {
            top_k_insert(p[base + j], j, top_k, &filled, values, best);
            top_k_insert(ph[base + j], j, top_k, &filled_hat, values_hat, best_hat);
        }
    }
    kl[q] = (float)fmax((acc_t)0, -p_delta + (lse_hat[q] - lse[q]));
    fisher[q] = (float)fmax((acc_t)0, p_delta2 - p_delta * p_delta);
    a2[q] = (float)a2sum;
    entropy[q] = (float)fmax((acc_t)0, lse[q] - ps);
    argmax_shift[q] = argmax != argmax_hat ? 1 : 0;
    if (top_k > 0) {
        int common = 0;
        for (int a = 0; a < top_k; ++a)
            for (int b = 0; b < top_k; ++b)
                common += best[a] == best_hat[b] ? 1 : 0;
        recall[q] = (float)common / (float)top_k;
    }
}
