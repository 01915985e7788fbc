#pragma once
// The element types and reduction ops that comm/ moves and reduces. comm/ never includes
// tensor/ (DESIGN.md: it is usable alone, like Gloo), so it has its own small DType; the
// numbering matches cohort::DType so that parallel/ can convert with a static_cast.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cohort::comm {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, u8 };
// avg is sum followed by a division by the number of contributors (integer division, toward
// zero, for integer types).
enum class ReduceOp : uint8_t { sum, avg, min, max, prod };

inline constexpr int kNumDTypes = 7;
inline constexpr int kNumReduceOps = 5;

size_t dtype_size(DType t);
const char* dtype_name(DType t);
const char* reduce_op_name(ReduceOp op);
// Throws InvalidArgument naming `what` when t or op is not one of the enumerators (values
// that came over the wire or through a cast).
void check_dtype(DType t, const char* what);
void check_reduce_op(ReduceOp op, const char* what);

// IEEE binary16 <-> float, round to nearest even, subnormals, inf and NaN (quiet).
inline float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise the mantissa
      int shift = 0;
      while (!(man & 0x400u)) {
        man <<= 1;
        ++shift;
      }
      u = sign | uint32_t(113 - shift) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13 | (man ? 0x400000u : 0u);
  } else {
    u = sign | (exp + 112u) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((mag >> 13) & 0x3ffu));
  if (mag >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (mag < 0x38800000u) {                                  // below 2^-14: subnormal or zero
    if (mag < 0x33000000u) return uint16_t(sign);           // below half the smallest subnormal
    uint32_t man = (mag & 0x7fffffu) | 0x800000u;
    int shift = 126 - int(mag >> 23);  // value / 2^-24 = man24 * 2^(exp - 126)
    uint32_t q = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
    return uint16_t(sign | q);
  }
  uint32_t m = mag + 0xfffu + ((mag >> 13) & 1u) - (112u << 23);
  return uint16_t(sign | (m >> 13));
}

inline float bf16_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {  // round to nearest even; NaN stays a quiet NaN
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

}  // namespace cohort::comm
