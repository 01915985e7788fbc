#pragma once
// Element types and devices. Both are part of every Tensor so that bf16/f16 and CUDA slot in
// without changing the API; today's kernels are float32 on CPU, plus integer index tensors.
// DType itself, its sizes and names and the 16-bit conversions live in core/dtype.h (comm/
// shares them); this header adds the C++ element types and the Device.
#include <cstdint>
#include <string>

#include "cohort/core/dtype.h"

namespace cohort {

// 16-bit float storage types. Arithmetic happens in float; these only convert (core/dtype.h:
// round to nearest even, NaN stays a quiet NaN).
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(float_to_bf16(f)) {}
  operator float() const { return bf16_to_float(bits); }
};
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f) : bits(float_to_half(f)) {}
  operator float() const { return half_to_float(bits); }
};

// Maps a C++ type to its DType: dtype_of<float>() == DType::f32.
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<Float16>() {
  return DType::f16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}

struct Device {
  enum class Kind : uint8_t { kCPU, kCUDA };
  Kind kind = Kind::kCPU;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int i) { return {Kind::kCUDA, i}; }
  bool is_cpu() const { return kind == Kind::kCPU; }
  bool operator==(const Device&) const = default;
  std::string str() const;
};

}  // namespace cohort
