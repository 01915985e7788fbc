#pragma once
// Max with its first position, merged in any order (reduce_max.cu;
// tests/cuda/reduce_max_math_test.cc).
#include "cohort/kernels/cuda/device_math.h"

namespace cohort::cuda::math {

// ---- max with its first position, in any merge order ----------------------------------------

// A candidate for cpu::max_middle: a value and its position along the reduced dim. The empty
// candidate {-inf, INT64_MAX} loses to every real element (a row of -inf still yields its first).
struct ArgMax {
  float val = -INFINITY;
  int64_t idx = INT64_MAX;
};

// Whether `a` beats `b`: a NaN beats any number, a larger number beats a smaller one, and equal
// values (two NaNs, or +0 and -0) go to the smaller position. A total order, so merging pieces
// in any tree gives the element cpu::max_middle's left-to-right scan picks.
COHORT_HD bool argmax_beats(ArgMax a, ArgMax b) {
  const bool a_nan = a.val != a.val, b_nan = b.val != b.val;
  if (a_nan != b_nan) return a_nan;
  if (!a_nan && a.val != b.val) return a.val > b.val;
  return a.idx < b.idx;
}

COHORT_HD ArgMax argmax_merge(ArgMax a, ArgMax b) {
  return argmax_beats(b, a) ? b : a;
}

COHORT_HD ArgMax argmax_add(ArgMax s, float x, int64_t j) {
  return argmax_merge(s, ArgMax{x, j});
}

}  // namespace cohort::cuda::math
