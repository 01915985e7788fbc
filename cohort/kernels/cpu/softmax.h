#pragma once
// Softmax-family float32 kernels on raw pointers, one row at a time, rows split over the
// intra-op pool. Numerically stable: every row is shifted by its max before exp. A row of
// all -inf, or one holding a NaN, gives NaN (as torch).
#include <cstdint>

namespace cohort::cpu {

// x [rows, cols] -> y [rows, cols] = softmax of each row.
void softmax_rows(const float* x, int64_t rows, int64_t cols, float* y);
// x [rows, cols] -> y [rows, cols] = x - logsumexp(row).
void log_softmax_rows(const float* x, int64_t rows, int64_t cols, float* y);

// y = softmax(x), g = dL/dy, both [rows, cols] -> dx = y * (g - sum(g * y)).
void softmax_backward_rows(const float* y, const float* g, int64_t rows, int64_t cols, float* dx);
// y = log_softmax(x), g = dL/dy -> dx = g - exp(y) * sum(g).
void log_softmax_backward_rows(const float* y, const float* g, int64_t rows, int64_t cols,
                               float* dx);

// logits [n, c], targets [n] (each in [0, c); the caller checks) -> stats [n, 2] = per row
// (m, log sum exp(x - m)) with m the row max; kept for backward. Returns
// sum_i -log softmax(logits)[i, targets_i] = sum_i (m_i - x_i,t) + lse_i, added in row order
// in double. Keeping m and the shifted log-sum apart keeps full precision for large logits.
double cross_entropy_forward(const float* logits, const int64_t* targets, int64_t n, int64_t c,
                             float* stats);
// dx [n, c] = (softmax(logits) - onehot(targets)) * scale, from the stats saved by forward.
// scale is dL/dloss / n for the mean reduction.
void cross_entropy_backward(const float* logits, const int64_t* targets, const float* stats,
                            int64_t n, int64_t c, float scale, float* dx);

}  // namespace cohort::cpu
