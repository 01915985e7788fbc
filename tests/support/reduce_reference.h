#pragma once
// The reference reduction the collective tests check against: values combined in double
// (exact for the small integers the tests use), one rank at a time.
#include <algorithm>

#include "cohort/comm/types.h"

namespace cohort::testing {

// acc op v; avg sums (the division comes after all ranks are combined).
inline double reference_combine(comm::ReduceOp op, double acc, double v) {
  switch (op) {
    case comm::ReduceOp::sum:
    case comm::ReduceOp::avg:
      return acc + v;
    case comm::ReduceOp::min:
      return std::min(acc, v);
    case comm::ReduceOp::max:
      return std::max(acc, v);
    case comm::ReduceOp::prod:
      return acc * v;
  }
  return acc;
}

}  // namespace cohort::testing
