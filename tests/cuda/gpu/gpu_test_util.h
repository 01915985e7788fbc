#pragma once
// What every GPU kernel test needs: a skip with the reason where no GPU is usable, random
// inputs, and a comparison against kernels/cpu that names the worst element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cohort/kernels/cuda/runtime.h"
#include "tests/cuda/random_floats.h"

namespace cohort::cuda::testing {

// Skips the test (GTEST_SKIP) on a machine without a usable CUDA device, with CUDA's reason.
#define COHORT_REQUIRE_GPU()                            \
  do {                                                  \
    std::string why_no_gpu;                             \
    if (::cohort::cuda::device_count(&why_no_gpu) == 0) \
      GTEST_SKIP() << "no CUDA device: " << why_no_gpu; \
  } while (0)

// Every element of `got` within atol + rtol * |want| of `want`; the failure names the first
// element out of tolerance and how many are.
inline ::testing::AssertionResult all_close(const std::vector<float>& got,
                                            const std::vector<float>& want, float rtol,
                                            float atol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    // Equal values first: inf - inf is NaN, which no tolerance admits.
    const bool ok = got[i] == want[i] ||
                    std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]) ||
                    (std::isnan(got[i]) && std::isnan(want[i]));
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements out of tolerance; first at " << first
         << ": GPU " << got[first] << ", CPU " << want[first];
}

}  // namespace cohort::cuda::testing
