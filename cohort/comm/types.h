#pragma once
// The element types and reduction ops that comm/ moves and reduces. comm/ never includes
// tensor/ (DESIGN.md: it is usable alone, like Gloo); the DType it tags buffers with is the
// one of core/dtype.h, the same type as a Tensor's dtype, so no cast is needed between them.
#include <cstddef>
#include <cstdint>

#include "cohort/core/dtype.h"

namespace cohort::comm {

// The one DType and its helpers (core/dtype.h), under the names comm/ code and users spell.
// Messages here name dtypes with dtype_short_name ("f32"), as the bench CLI does.
using cohort::bf16_to_float;
using cohort::check_dtype;
using cohort::DType;
using cohort::dtype_short_name;
using cohort::dtype_size;
using cohort::float_to_bf16;
using cohort::float_to_half;
using cohort::half_to_float;
using cohort::kNumDTypes;

// avg is sum followed by a division by the number of contributors (integer division, toward
// zero, for integer types).
enum class ReduceOp : uint8_t { sum, avg, min, max, prod };

inline constexpr int kNumReduceOps = 5;

const char* reduce_op_name(ReduceOp op);
// Throws InvalidArgument naming `what` when op is not one of the enumerators (a value that
// came over the wire or through a cast).
void check_reduce_op(ReduceOp op, const char* what);

}  // namespace cohort::comm
