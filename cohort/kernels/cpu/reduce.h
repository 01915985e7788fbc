#pragma once
// Reduction float32 kernels on raw pointers. The ops layer (ops/reduce.cc) brings every
// reduction into the [outer, r, inner] form: a contiguous tensor whose middle dim (the
// reduced dims, merged) is summed or maxed away. Results are deterministic and do not depend on
// the thread count: each output element is computed by one fixed sequence of operations.
#include <cstdint>

namespace cohort::cpu {

// x [outer, r, inner] -> out [outer, inner] = sum over r.
// Rows (inner == 1) are summed in blocks of 8 lanes, blocks combined in double; columns
// (inner > 1) are accumulated row by row, vectorised across inner.
void sum_middle(const float* x, int64_t outer, int64_t r, int64_t inner, float* out);

// x [outer, r, inner] -> val [outer, inner] = max over r, and idx [outer, inner] (may be null)
// = the first position along r holding it. A NaN counts as the maximum (torch.max does too).
void max_middle(const float* x, int64_t outer, int64_t r, int64_t inner, float* val, int64_t* idx);

// g [outer, inner], idx [outer, inner] -> dx [outer, r, inner]: g routed to the position idx
// chose, zero elsewhere (the backward of max_middle).
void max_middle_backward(const float* g, const int64_t* idx, int64_t outer, int64_t r,
                         int64_t inner, float* dx);

// g [outer, inner] -> out [outer, r, inner] = g * scale repeated along r (the backward of a
// sum, scale 1, or of a mean, scale 1/r).
void broadcast_middle(const float* g, int64_t outer, int64_t r, int64_t inner, float scale,
                      float* out);

}  // namespace cohort::cpu
