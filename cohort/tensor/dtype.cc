#include "cohort/tensor/dtype.h"

#include <cmath>

namespace cohort {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
    case DType::u8:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::f16:
      return "float16";
    case DType::bf16:
      return "bfloat16";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::u8:
      return "uint8";
  }
  return "?";
}

std::string Device::str() const {
  return kind == Kind::kCPU ? "cpu" : "cuda:" + std::to_string(index);
}

// IEEE half conversion, round to nearest even, with subnormals, inf and NaN.
Float16::Float16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) {
    bits = uint16_t(sign | 0x7e00u);
  } else if (mag >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    bits = uint16_t(sign | 0x7c00u);
  } else if (mag < 0x38800000u) {  // below 2^-14: subnormal half (or zero)
    float a;
    std::memcpy(&a, &mag, 4);
    bits = uint16_t(sign | uint32_t(std::nearbyint(a * 16777216.0f)));  // a / 2^-24
  } else {
    uint32_t m = mag + 0xfffu + ((mag >> 13) & 1u) - (112u << 23);
    bits = uint16_t(sign | (m >> 13));
  }
}

Float16::operator float() const {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t man = bits & 0x3ffu;
  float out;
  if (exp == 0) {
    out = std::ldexp(float(man), -24);
    uint32_t u;
    std::memcpy(&u, &out, 4);
    u |= sign;
    std::memcpy(&out, &u, 4);
    return out;
  }
  uint32_t u =
      exp == 31 ? (sign | 0x7f800000u | (man << 13)) : (sign | ((exp + 112u) << 23) | (man << 13));
  std::memcpy(&out, &u, 4);
  return out;
}

}  // namespace cohort
