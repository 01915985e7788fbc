// The reduction kernels and 16-bit conversions that every collective relies on: exhaustive
// half round trips, conversions against the compiler's _Float16, and each (dtype, op) kernel
// against a scalar loop on inexact values (this exercises the vectorised clones).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cohort/comm/reduce.h"
#include "tests/comm/collective_util.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;

TEST(HalfConversion, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = half_to_float(uint16_t(h));
    bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
    if (nan) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
    } else {
      ASSERT_EQ(float_to_half(f), uint16_t(h)) << std::hex << h;
    }
  }
}

#ifdef __FLT16_MAX__
TEST(HalfConversion, FloatToHalfMatchesTheCompilersRounding) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    // Bias towards the half range (exponents 100..145) so that subnormals, ties and overflow
    // get plenty of cases.
    if (i % 2) u = (u & 0x807fffffu) | ((100u + u % 46u) << 23);
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    _Float16 h = _Float16(f);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    ASSERT_EQ(float_to_half(f), want) << "float bits 0x" << std::hex << u;
  }
}
#endif

TEST(Bf16Conversion, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties go to even (1.0).
  EXPECT_EQ(float_to_bf16(1.00390625f), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1.0078125 (odd) and 1.015625: up to even.
  EXPECT_EQ(float_to_bf16(1.01171875f), 0x3f82);
  EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

double combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return a + b;
    case ReduceOp::min:
      return std::min(a, b);
    case ReduceOp::max:
      return std::max(a, b);
    case ReduceOp::prod:
      return a * b;
  }
  return 0;
}

// Scalar reference: widen both operands, combine in the kernel's precision, round back.
std::vector<char> scalar_reduce(DType t, ReduceOp op, const std::vector<char>& a,
                                const std::vector<char>& b, size_t n) {
  std::vector<char> out(a.size());
  for (size_t i = 0; i < n; ++i) {
    double x = get(t, a.data(), i), y = get(t, b.data(), i), r;
    if (t == DType::f32 || t == DType::f16 || t == DType::bf16) {
      float fx = float(x), fy = float(y);
      r = op == ReduceOp::min    ? std::min(fx, fy)
          : op == ReduceOp::max  ? std::max(fx, fy)
          : op == ReduceOp::prod ? fx * fy
                                 : fx + fy;
    } else if (t == DType::u8) {
      r = double(uint8_t(int64_t(combine(op, x, y)) & 0xff));
    } else {
      r = combine(op, x, y);
    }
    put(t, out.data(), i, r);
  }
  return out;
}

TEST(ReduceKernel, EveryDtypeAndOpMatchesScalarLoopAndAliases) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  const size_t n = 1003;  // not a multiple of any vector width
  for (DType t : kAllDTypes) {
    bool integer = t == DType::i32 || t == DType::i64 || t == DType::u8;
    std::vector<char> a(n * dtype_size(t) + 1), b(a.size());
    for (size_t i = 0; i < n; ++i) {
      double x = dist(rng), y = dist(rng);
      if (integer) x = std::round(x), y = std::round(y);
      put(t, a.data(), i, x);
      put(t, b.data(), i, y);
    }
    for (ReduceOp op : kAllOps) {
      auto want = scalar_reduce(t, op, a, b, n);
      std::vector<char> out(a.size());
      reduce(t, op, out.data(), a.data(), b.data(), n);
      EXPECT_EQ(compare(t, out.data(), want.data(), n), "")
          << dtype_name(t) << " " << reduce_op_name(op);
      std::vector<char> acc = b;  // dst aliasing rhs, as the transports use it
      reduce(t, op, acc.data(), a.data(), acc.data(), n);
      EXPECT_EQ(compare(t, acc.data(), want.data(), n), "")
          << dtype_name(t) << " " << reduce_op_name(op) << " in place";
    }
  }
}

TEST(ReduceKernel, DivideByFinishesAnAverage) {
  std::vector<char> buf(16);
  put(DType::i32, buf.data(), 0, -7);
  put(DType::i32, buf.data(), 1, 7);
  divide_by(DType::i32, buf.data(), 2, 2);
  EXPECT_EQ(get(DType::i32, buf.data(), 0), -3);  // toward zero
  EXPECT_EQ(get(DType::i32, buf.data(), 1), 3);
  put(DType::bf16, buf.data(), 0, 3.0);
  divide_by(DType::bf16, buf.data(), 1, 4);
  EXPECT_EQ(get(DType::bf16, buf.data(), 0), 0.75);
  EXPECT_THROW(divide_by(DType::f32, buf.data(), 1, 0), InvalidArgument);
}

// An integer avg over more ranks than its type holds (u8 over 256 or 300 ranks) divides by the
// world size, not by the size wrapped to the type (0: a crash; 44: a wrong mean).
TEST(ReduceKernel, IntegerDivideByAWorldLargerThanTheType) {
  std::vector<char> buf(16);
  put(DType::u8, buf.data(), 0, 255);
  divide_by(DType::u8, buf.data(), 1, 256);
  EXPECT_EQ(get(DType::u8, buf.data(), 0), 0);
  put(DType::u8, buf.data(), 0, 200);
  divide_by(DType::u8, buf.data(), 1, 300);
  EXPECT_EQ(get(DType::u8, buf.data(), 0), 0);
  put(DType::u8, buf.data(), 0, 250);
  divide_by(DType::u8, buf.data(), 1, 5);
  EXPECT_EQ(get(DType::u8, buf.data(), 0), 50);
  put(DType::i32, buf.data(), 0, -70000);
  divide_by(DType::i32, buf.data(), 1, 70000);
  EXPECT_EQ(get(DType::i32, buf.data(), 0), -1);
}

// The vectorised divide (a multiply by the reciprocal for powers of two) must round exactly as a
// scalar division does, subnormal results included, or an avg would differ across algorithms.
TEST(ReduceKernel, DivideByMatchesScalarDivisionBitForBit) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mantissa(-100.0f, 100.0f);
  const size_t n = 1003;
  for (DType t : kAllDTypes) {
    bool integer = t == DType::i32 || t == DType::i64 || t == DType::u8;
    std::vector<char> values(n * dtype_size(t));
    for (size_t i = 0; i < n; ++i) {
      double x = mantissa(rng);
      if (i % 7 == 0) x *= 1e-39;  // subnormal in f32 (and its quotients in f16 / bf16 too)
      if (integer) x = std::round(t == DType::u8 ? std::abs(x) : x);
      put(t, values.data(), i, x);
    }
    for (int divisor : {1, 2, 3, 4, 7, 8, 64}) {
      std::vector<char> want = values, got = values;
      for (size_t i = 0; i < n; ++i) {
        double x = get(t, values.data(), i);
        double q = t == DType::f64 ? x / double(divisor)
                   : integer       ? double(int64_t(x) / divisor)
                                   : double(float(x) / float(divisor));
        put(t, want.data(), i, q);
      }
      divide_by(t, got.data(), n, divisor);
      EXPECT_EQ(compare(t, got.data(), want.data(), n), "") << dtype_name(t) << " / " << divisor;
    }
  }
}

// The two-rank allreduce's one-pass kernel must give, in both outputs, exactly what the
// three passes it replaced give (reduce, divide_by for avg, a copy), also when an output
// aliases an input, as the in-place allreduce has it.
TEST(ReduceKernel, ReduceIntoTwoMatchesReduceThenDivideThenCopy) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  for (DType t : kAllDTypes) {
    bool integer = t == DType::i32 || t == DType::i64 || t == DType::u8;
    for (size_t n : {size_t(1), size_t(15), size_t(1003)}) {
      std::vector<char> a(n * dtype_size(t)), b(a.size());
      for (size_t i = 0; i < n; ++i) {
        double x = dist(rng), y = dist(rng);
        if (i % 5 == 0 && !integer) x *= 1e-38;  // near-subnormal sums and quotients
        if (integer) x = std::round(std::abs(x)), y = std::round(std::abs(y));
        put(t, a.data(), i, x);
        put(t, b.data(), i, y);
      }
      for (ReduceOp op : kAllOps) {
        for (int divisor : {1, 2, 3, 8}) {
          std::vector<char> want(a.size());
          reduce(t, op, want.data(), a.data(), b.data(), n);
          if (op == ReduceOp::avg) divide_by(t, want.data(), n, divisor);
          std::string what = std::string(dtype_name(t)) + " " + reduce_op_name(op) + " / " +
                             std::to_string(divisor) + ", n " + std::to_string(n);
          std::vector<char> x(a.size()), y(a.size());
          reduce_into_two(t, op, x.data(), y.data(), a.data(), b.data(), n, divisor);
          EXPECT_EQ(compare(t, x.data(), want.data(), n), "") << what;
          EXPECT_EQ(compare(t, y.data(), want.data(), n), "") << what << " (copy)";
          std::vector<char> in_a = a, in_b = b;  // dst is lhs, copy is rhs
          reduce_into_two(t, op, in_a.data(), in_b.data(), in_a.data(), in_b.data(), n, divisor);
          EXPECT_EQ(compare(t, in_a.data(), want.data(), n), "") << what << " in place";
          EXPECT_EQ(compare(t, in_b.data(), want.data(), n), "") << what << " in place (copy)";
        }
      }
    }
  }
  std::vector<char> buf(8);
  EXPECT_THROW(reduce_into_two(DType::f32, ReduceOp::avg, buf.data(), buf.data() + 4, buf.data(),
                               buf.data(), 1, 0),
               InvalidArgument);
}

}  // namespace
}  // namespace cohort::comm
