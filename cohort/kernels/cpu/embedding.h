#pragma once
// Embedding lookup and its scatter-add gradient, float32 rows, int64 indices.
#include <cstdint>

namespace cohort::cpu {

// weight [V, D], idx [n] (each already checked to be in [0, V)) -> out [n, D]: row i =
// weight[idx[i]].
void embedding_forward(const float* weight, int64_t d, const int64_t* idx, int64_t n, float* out);

// dout [n, D] -> dweight [V, D] (overwritten): zeros, then dweight[idx[i]] += dout[i] for i in
// order. Threads split the D columns, so repeated indices are summed in the same order always.
void embedding_backward(const float* dout, const int64_t* idx, int64_t n, int64_t v, int64_t d,
                        float* dweight);

}  // namespace cohort::cpu
