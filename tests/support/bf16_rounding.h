#pragma once
// Values rounded to bf16 and back (to nearest, ties to even: core/dtype.h's float_to_bf16), the
// operands that train.precision = "bf16" computes with: the tests' references are f32 kernels
// run on these.
#include <vector>

#include "cohort/core/dtype.h"

namespace cohort::testing {

inline std::vector<float> rounded_to_bf16(std::vector<float> v) {
  for (float& x : v) x = bf16_to_float(float_to_bf16(x));
  return v;
}

}  // namespace cohort::testing
