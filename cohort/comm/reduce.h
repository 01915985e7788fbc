#pragma once
// Element-wise reduction kernels used by the collectives (and by transports that reduce
// straight out of a receive buffer).
//
// Order matters for bit-identical results: reduce() always computes lhs op rhs, and the
// algorithms choose which operand comes first (lower rank group first, or ring order), so
// every rank performs exactly the same floating-point operations. f16 and bf16 are widened to
// float, combined, and rounded back (round to nearest even). Integer sum and prod wrap.
#include <cstddef>

#include "cohort/comm/types.h"

namespace cohort::comm {

// dst[i] = lhs[i] op rhs[i] for i < count. dst may alias lhs or rhs (exactly, not partially).
// avg combines like sum; finish it with divide_by().
void reduce(DType dtype, ReduceOp op, void* dst, const void* lhs, const void* rhs, size_t count);

// buf[i] /= divisor (integer division toward zero for integer types). Finishes an avg.
void divide_by(DType dtype, void* buf, size_t count, int divisor);

// dst[i] = copy[i] = lhs[i] op rhs[i], then / divisor for avg (divisor is ignored otherwise):
// bit for bit what reduce() then divide_by() then a copy give, in one pass. Each of dst and
// copy may alias lhs or rhs exactly; dst and copy must not overlap each other.
void reduce_into_two(DType dtype, ReduceOp op, void* dst, void* copy, const void* lhs,
                     const void* rhs, size_t count, int divisor);

}  // namespace cohort::comm
