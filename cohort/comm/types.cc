#include "cohort/comm/types.h"

#include "cohort/core/error.h"

namespace cohort::comm {

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

void check_reduce_op(ReduceOp op, const char* what) {
  COHORT_CHECK_ARG(uint8_t(op) < kNumReduceOps, what, ": unknown reduce op ", int(uint8_t(op)),
                   " (expected 0..", kNumReduceOps - 1, ")");
}

}  // namespace cohort::comm
