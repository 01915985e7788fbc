#pragma once
// DType: the element types of the whole codebase. A Tensor carries one (tensor/), and comm/
// moves raw buffers tagged with one (comm::DType is this same type, so that comm/ stays free of
// tensor/ and parallel/ passes a tensor's dtype to a collective without a cast). One size and
// name table and one float16/bfloat16 conversion serve every layer.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cohort {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, u8 };
inline constexpr int kNumDTypes = 7;

// Bytes per element. InvalidArgument for a value that is not one of the enumerators.
size_t dtype_size(DType t);
// PyTorch's spelling, "float32", "bfloat16", "int64", ...: what tensor-level messages say.
const char* dtype_name(DType t);
// The enumerators' spelling, "f32", "bf16", "i64", ...: comm/ messages and the bench CLI.
const char* dtype_short_name(DType t);
// Throws InvalidArgument naming `what` when t is not one of the enumerators (a value that came
// over the wire or through a cast).
void check_dtype(DType t, const char* what);

// IEEE binary16 and bfloat16 <-> float. Narrowing rounds to nearest even; values past the
// largest finite one become inf; subnormals are kept (binary16; bfloat16 has float's range).
// A NaN stays a NaN of the same sign, made quiet, with as much of its payload as fits (the top
// bits), as x86 F16C and the compilers' _Float16 conversion do. Widening is exact.
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

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
  } else if (exp == 31) {  // inf, or NaN (made quiet, payload kept)
    u = sign | 0x7f800000u | man << 13 | (man ? 0x400000u : 0u);
  } else {
    u = sign | (exp + 112u) << 23 | man << 13;
  }
  return float_from_bits(u);
}

inline uint16_t float_to_half(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((mag >> 13) & 0x3ffu));  // NaN
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
  return float_from_bits(uint32_t(b) << 16);
}

// Branch-free (a select), so that comm/'s reduction loops that call it still vectorise.
inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = (u >> 16) | 0x40u;  // a NaN keeps its sign and top payload, made quiet
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

}  // namespace cohort
