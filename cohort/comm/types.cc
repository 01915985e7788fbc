#include "cohort/comm/types.h"

#include "cohort/core/error.h"

namespace cohort::comm {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
    case DType::u8:
      return 1;
  }
  check_dtype(t, "dtype_size");
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::u8:
      return "u8";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
    case ReduceOp::prod:
      return "prod";
  }
  return "?";
}

void check_dtype(DType t, const char* what) {
  COHORT_CHECK_ARG(uint8_t(t) < kNumDTypes, what, ": unknown dtype ", int(uint8_t(t)),
                   " (expected 0..", kNumDTypes - 1, ")");
}

void check_reduce_op(ReduceOp op, const char* what) {
  COHORT_CHECK_ARG(uint8_t(op) < kNumReduceOps, what, ": unknown reduce op ", int(uint8_t(op)),
                   " (expected 0..", kNumReduceOps - 1, ")");
}

}  // namespace cohort::comm
