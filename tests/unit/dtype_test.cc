// core/dtype.h: the one DType (shared by tensors and comm/), its size and name tables, and the
// one float16/bfloat16 conversion, at its edges: NaN (quiet, signed, payload kept), +-inf,
// +-0, subnormals, ties to even, and overflow to inf.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cohort/comm/types.h"
#include "cohort/core/dtype.h"
#include "cohort/core/error.h"
#include "cohort/tensor/dtype.h"

namespace cohort {
namespace {

static_assert(std::is_same_v<comm::DType, DType>, "comm/ and tensors share one DType");

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
bool half_is_nan(uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}
bool half_is_quiet(uint16_t h) {
  return (h & 0x0200u) != 0;
}
bool bf16_is_nan(uint16_t b) {
  return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0;
}
bool float_is_quiet_nan(float f) {
  return std::isnan(f) && (bits_of(f) & 0x400000u) != 0;
}

TEST(DType, SizesAndBothSpellings) {
  struct Row {
    DType t;
    size_t size;
    const char* name;
    const char* short_name;
  };
  for (Row r : {Row{DType::f32, 4, "float32", "f32"}, Row{DType::f64, 8, "float64", "f64"},
                Row{DType::f16, 2, "float16", "f16"}, Row{DType::bf16, 2, "bfloat16", "bf16"},
                Row{DType::i32, 4, "int32", "i32"}, Row{DType::i64, 8, "int64", "i64"},
                Row{DType::u8, 1, "uint8", "u8"}}) {
    EXPECT_EQ(dtype_size(r.t), r.size) << r.name;
    EXPECT_STREQ(dtype_name(r.t), r.name);
    EXPECT_STREQ(dtype_short_name(r.t), r.short_name);
    EXPECT_NO_THROW(check_dtype(r.t, "test"));
  }
  DType bad = static_cast<DType>(kNumDTypes);
  EXPECT_STREQ(dtype_name(bad), "?");
  EXPECT_STREQ(dtype_short_name(bad), "?");
  EXPECT_THROW(dtype_size(bad), InvalidArgument);
  try {
    check_dtype(bad, "recv header");
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("recv header: unknown dtype 7"), std::string::npos)
        << e.what();
  }
}

TEST(HalfConversion, NanStaysAQuietNanWithItsSignAndPayload) {
  for (uint32_t sign : {0u, 0x80000000u}) {
    // Quiet and signalling NaNs, with the payload high, low (lost in 10 bits) or both.
    for (uint32_t man : {0x400000u, 0x000001u, 0x001fffu, 0x012000u, 0x7fffffu, 0x200000u}) {
      uint32_t in = sign | 0x7f800000u | man;
      uint16_t h = float_to_half(from_bits(in));
      EXPECT_TRUE(half_is_nan(h)) << std::hex << in << " -> " << h;
      EXPECT_TRUE(half_is_quiet(h)) << std::hex << in << " -> " << h;
      EXPECT_EQ(h & 0x8000u, sign >> 16) << std::hex << in;
      EXPECT_EQ(h & 0x1ffu, (man >> 13) & 0x1ffu) << std::hex << in;  // the payload's top bits
    }
  }
  // Widening a signalling half NaN gives a quiet float NaN, same sign and payload.
  for (uint16_t h : {uint16_t(0x7c01), uint16_t(0xfc01), uint16_t(0x7d55), uint16_t(0x7e00)}) {
    float f = half_to_float(h);
    EXPECT_TRUE(float_is_quiet_nan(f)) << std::hex << h;
    EXPECT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << h;
    EXPECT_EQ((bits_of(f) >> 13) & 0x1ffu, h & 0x1ffu) << std::hex << h;
  }
}

TEST(HalfConversion, InfinitiesZerosAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_half(inf), 0x7c00);
  EXPECT_EQ(float_to_half(-inf), 0xfc00);
  EXPECT_EQ(half_to_float(0x7c00), inf);
  EXPECT_EQ(half_to_float(0xfc00), -inf);
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(bits_of(half_to_float(0x0000)), 0x00000000u);
  EXPECT_EQ(bits_of(half_to_float(0x8000)), 0x80000000u);
  // 65504 is the largest half; values below 65520 round down to it, 65520 and up are inf.
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_half(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::max()), 0x7c00);
}

TEST(HalfConversion, SubnormalsAndTiesToEven) {
  const float tiny = std::ldexp(1.0f, -24);  // the smallest half subnormal
  EXPECT_EQ(float_to_half(tiny), 0x0001);
  EXPECT_EQ(float_to_half(-tiny), 0x8001);
  EXPECT_EQ(half_to_float(0x0001), tiny);
  EXPECT_EQ(half_to_float(0x03ff), 1023 * tiny);  // the largest subnormal
  EXPECT_EQ(float_to_half(1023 * tiny), 0x03ff);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);  // the smallest normal
  // Half of the smallest subnormal is a tie between 0 and 1: even (0); a hair above: 1.
  EXPECT_EQ(float_to_half(tiny / 2), 0x0000);
  EXPECT_EQ(float_to_half(-tiny / 2), 0x8000);
  EXPECT_EQ(float_to_half(std::nextafter(tiny / 2, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half(1.5f * tiny), 0x0002);             // tie between 1 and 2: even
  EXPECT_EQ(float_to_half(2.5f * tiny), 0x0002);             // tie between 2 and 3: even
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -40)), 0x0000);   // far below: zero
  EXPECT_EQ(float_to_half(from_bits(0x00000001u)), 0x0000);  // a float subnormal
  // Normal ties: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 (goes to 1, even); 1 + 3 * 2^-11
  // halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (goes up, even).
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_half(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
}

TEST(Bf16Conversion, NanStaysAQuietNanWithItsSign) {
  for (uint32_t sign : {0u, 0x80000000u}) {
    // 0x7f800001 would truncate to inf without the quiet bit.
    for (uint32_t man : {0x400000u, 0x000001u, 0x00ffffu, 0x7fffffu, 0x010000u}) {
      uint32_t in = sign | 0x7f800000u | man;
      uint16_t b = float_to_bf16(from_bits(in));
      EXPECT_TRUE(bf16_is_nan(b)) << std::hex << in << " -> " << b;
      EXPECT_TRUE(b & 0x40u) << std::hex << in << " -> " << b;
      EXPECT_EQ(b & 0x8000u, sign >> 16) << std::hex << in;
      EXPECT_EQ(b & 0x3fu, (man >> 16) & 0x3fu) << std::hex << in;
    }
  }
  float f = bf16_to_float(0xffc1);
  EXPECT_TRUE(float_is_quiet_nan(f));
  EXPECT_TRUE(std::signbit(f));
}

TEST(Bf16Conversion, InfinitiesZerosSubnormalsTiesAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_bf16(inf), 0x7f80);
  EXPECT_EQ(float_to_bf16(-inf), 0xff80);
  EXPECT_EQ(bf16_to_float(0xff80), -inf);
  EXPECT_EQ(float_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(bits_of(bf16_to_float(0x8000)), 0x80000000u);
  // Float subnormals keep their (rounded) top bits; the tie 0x00008000 goes to even (0).
  EXPECT_EQ(float_to_bf16(from_bits(0x00010000u)), 0x0001);
  EXPECT_EQ(float_to_bf16(from_bits(0x00008000u)), 0x0000);
  EXPECT_EQ(float_to_bf16(from_bits(0x00018000u)), 0x0002);
  EXPECT_EQ(float_to_bf16(from_bits(0x80008001u)), 0x8001);
  // Ties in normal numbers (1 + 2^-8: down to 1.0; 1 + 3 * 2^-8: up to even).
  EXPECT_EQ(float_to_bf16(1.00390625f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.01171875f), 0x3f82);
  // The largest bf16 stays; past the halfway point to the next binade it rounds to inf.
  EXPECT_EQ(float_to_bf16(bf16_to_float(0x7f7f)), 0x7f7f);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::max()), 0xff80);
}

TEST(Bf16Conversion, EveryBf16RoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = bf16_to_float(uint16_t(b));
    if (bf16_is_nan(uint16_t(b))) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
    } else {
      ASSERT_EQ(float_to_bf16(f), uint16_t(b)) << std::hex << b;
    }
  }
}

TEST(HalfConversion, TensorStorageTypesUseTheSameConversion) {
  for (float v : {0.0f, -0.0f, 1.0f, 1.0f + std::ldexp(1.0f, -11), 65520.0f, 3e-8f, -2.5f,
                  std::numeric_limits<float>::quiet_NaN(), from_bits(0xff800001u)}) {
    EXPECT_EQ(Float16(v).bits, float_to_half(v)) << v;
    EXPECT_EQ(BFloat16(v).bits, float_to_bf16(v)) << v;
    uint16_t h = float_to_half(v), b = float_to_bf16(v);
    EXPECT_EQ(bits_of(float(Float16(v))), bits_of(half_to_float(h))) << v;
    EXPECT_EQ(bits_of(float(BFloat16(v))), bits_of(bf16_to_float(b))) << v;
  }
}

}  // namespace
}  // namespace cohort
