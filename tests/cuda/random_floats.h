#pragma once
// Random float32 inputs for the CUDA tests, host side only (the arithmetic tests build without
// CUDA): n values uniform in [lo, hi) from a seed, the same on every run.
#include <cstdint>
#include <random>
#include <vector>

namespace cohort::cuda::testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace cohort::cuda::testing
