#pragma once
// Shared helpers for tests/ckpt: bitwise tensor comparison and patterned tensors (temporary
// directories and raw file access are in tests/support/files.h).
#include <gtest/gtest.h>

#include <cstring>

#include "cohort/ckpt/safetensors.h"

namespace cohort::ckpt::testing {

// Same dtype, shape and bytes (NaN payloads and -0.0 included).
inline ::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    return ::testing::AssertionFailure()
           << dtype_name(a.dtype()) << " vs " << dtype_name(b.dtype());
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << shape_str(a.shape()) << " vs " << shape_str(b.shape());
  if (a.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) != 0)
    return ::testing::AssertionFailure() << "bytes differ for " << a.str();
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult same_tensors(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first)
      return ::testing::AssertionFailure() << "name " << a[i].first << " vs " << b[i].first;
    auto r = bitwise_equal(a[i].second, b[i].second);
    if (!r) return r << " (tensor " << a[i].first << ")";
  }
  return ::testing::AssertionSuccess();
}

// A tensor whose bytes are a deterministic pattern (any dtype, including f16/bf16).
inline Tensor patterned(const Shape& shape, DType dtype, uint8_t seed) {
  Tensor t = empty(shape, dtype);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = uint8_t(seed + i * 37 + (i >> 3));
  return t;
}

}  // namespace cohort::ckpt::testing
