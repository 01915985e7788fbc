#pragma once
// Element types and devices. Both are part of every Tensor so that bf16/f16 and CUDA slot in
// without changing the API; today's kernels are float32 on CPU, plus integer index tensors.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace cohort {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, u8 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);

// 16-bit float storage types. Arithmetic happens in float; these only convert.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) {  // round to nearest even; NaN stays NaN
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = uint16_t((u >> 16) | 0x40);
      return;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = uint16_t(u >> 16);
  }
  operator float() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f);
  operator float() const;
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
