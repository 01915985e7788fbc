#pragma once
// Helpers for walking strided (non-contiguous, broadcast) tensors and for dispatching on dtype.
#include <array>
#include <cstdint>
#include <tuple>
#include <vector>

#include "cohort/tensor/tensor.h"

namespace cohort {

// Calls fn(off_0, ..., off_k) for every logical index of `shape`, in row-major order, where
// off_j = sum_d index[d] * strides_j[d]. A stride of 0 broadcasts. The innermost dimension is
// a tight loop; the outer ones advance an odometer.
template <size_t K, typename Fn>
void for_each_offset(const Shape& shape, const std::array<const Shape*, K>& strides, Fn&& fn) {
  const int64_t nd = int64_t(shape.size());
  if (shape_numel(shape) == 0) return;
  std::array<int64_t, K> off{};
  if (nd == 0) {
    std::apply(fn, off);
    return;
  }
  std::vector<int64_t> idx(size_t(nd), 0);
  const int64_t inner = shape[nd - 1];
  std::array<int64_t, K> inner_stride;
  for (size_t k = 0; k < K; ++k) inner_stride[k] = (*strides[k])[nd - 1];
  for (;;) {
    std::array<int64_t, K> o = off;
    for (int64_t i = 0; i < inner; ++i) {
      std::apply(fn, o);
      for (size_t k = 0; k < K; ++k) o[k] += inner_stride[k];
    }
    int64_t d = nd - 2;
    for (; d >= 0; --d) {
      for (size_t k = 0; k < K; ++k) off[k] += (*strides[k])[d];
      if (++idx[d] < shape[d]) break;
      for (size_t k = 0; k < K; ++k) off[k] -= (*strides[k])[d] * shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// Runs `body` with T bound to the C++ type of `dtype`.
#define COHORT_DISPATCH(dtype, T, ...) \
  switch (dtype) {                     \
    case ::cohort::DType::f32: {       \
      using T = float;                 \
      __VA_ARGS__;                     \
      break;                           \
    }                                  \
    case ::cohort::DType::f64: {       \
      using T = double;                \
      __VA_ARGS__;                     \
      break;                           \
    }                                  \
    case ::cohort::DType::f16: {       \
      using T = ::cohort::Float16;     \
      __VA_ARGS__;                     \
      break;                           \
    }                                  \
    case ::cohort::DType::bf16: {      \
      using T = ::cohort::BFloat16;    \
      __VA_ARGS__;                     \
      break;                           \
    }                                  \
    case ::cohort::DType::i32: {       \
      using T = int32_t;               \
      __VA_ARGS__;                     \
      break;                           \
    }                                  \
    case ::cohort::DType::i64: {       \
      using T = int64_t;               \
      __VA_ARGS__;                     \
      break;                           \
    }                                  \
    case ::cohort::DType::u8: {        \
      using T = uint8_t;               \
      __VA_ARGS__;                     \
      break;                           \
    }                                  \
  }

}  // namespace cohort
