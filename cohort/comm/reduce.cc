#include "cohort/comm/reduce.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cohort/core/error.h"

// Hot loops are compiled twice (x86-64-v3 with AVX2/FMA/F16C, and the baseline); the loader
// picks one per process. Same idea as kernels/cpu/simd.h, which comm/ must not include.
// Not under sanitizers: their runtime is not up yet when the loader runs ifunc resolvers.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define COMM_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define COMM_SIMD_CLONES
#endif
#define COMM_INLINE inline __attribute__((always_inline))

namespace cohort::comm {
namespace {

// Storage tags for the 16-bit floats: loads widen to float, stores round back.
struct Half {
  uint16_t bits;
};
struct BHalf {
  uint16_t bits;
};

#ifdef __FLT16_MAX__
COMM_INLINE float load(const Half* p) {
  _Float16 h;
  std::memcpy(&h, p, 2);
  return float(h);
}
COMM_INLINE void store(Half* p, float v) {
  _Float16 h = _Float16(v);
  std::memcpy(p, &h, 2);
}
#else
COMM_INLINE float load(const Half* p) {
  return half_to_float(p->bits);
}
COMM_INLINE void store(Half* p, float v) {
  p->bits = float_to_half(v);
}
#endif

COMM_INLINE float load(const BHalf* p) {
  return bf16_to_float(p->bits);
}
COMM_INLINE void store(BHalf* p, float v) {
  p->bits = float_to_bf16(v);  // branch-free (core/dtype.h), so the loop still vectorises
}

template <typename T>
COMM_INLINE auto load(const T* p) {
  if constexpr (std::is_integral_v<T>) {
    return std::make_unsigned_t<T>(*p);  // wrap-around instead of signed overflow
  } else {
    return *p;
  }
}
template <typename T, typename V>
COMM_INLINE void store(T* p, V v) {
  *p = T(v);
}

struct Sum {
  template <typename V>
  COMM_INLINE static V apply(V a, V b) {
    return V(a + b);
  }
};
struct Prod {
  template <typename V>
  COMM_INLINE static V apply(V a, V b) {
    return V(a * b);
  }
};
// min/max compare as signed for integer types (load() widened them to unsigned).
template <typename T, bool kMax>
struct MinMax {
  template <typename V>
  COMM_INLINE static V apply(V a, V b) {
    if constexpr (std::is_integral_v<T>) {
      T x = T(a), y = T(b);
      return V((x < y) != kMax ? x : y);
    } else {
      return (a < b) != kMax ? a : b;
    }
  }
};

template <typename T, typename Op>
COMM_INLINE void loop(void* dst, const void* lhs, const void* rhs, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* a = static_cast<const T*>(lhs);
  const T* b = static_cast<const T*>(rhs);
  for (size_t i = 0; i < n; ++i) store(d + i, Op::apply(load(a + i), load(b + i)));
}

using Kernel = void (*)(void*, const void*, const void*, size_t);

#define COMM_DEFINE_KERNELS(T, name)                                                    \
  COMM_SIMD_CLONES void name##_sum(void* d, const void* a, const void* b, size_t n) {   \
    loop<T, Sum>(d, a, b, n);                                                           \
  }                                                                                     \
  COMM_SIMD_CLONES void name##_prod(void* d, const void* a, const void* b, size_t n) {  \
    loop<T, Prod>(d, a, b, n);                                                          \
  }                                                                                     \
  COMM_SIMD_CLONES void name##_min(void* d, const void* a, const void* b, size_t n) {   \
    loop<T, MinMax<T, false>>(d, a, b, n);                                              \
  }                                                                                     \
  COMM_SIMD_CLONES void name##_max(void* d, const void* a, const void* b, size_t n) {   \
    loop<T, MinMax<T, true>>(d, a, b, n);                                               \
  }                                                                                     \
  constexpr Kernel name##_kernels[kNumReduceOps] = {name##_sum, name##_sum, name##_min, \
                                                    name##_max, name##_prod};

COMM_DEFINE_KERNELS(float, f32)
COMM_DEFINE_KERNELS(double, f64)
COMM_DEFINE_KERNELS(Half, f16)
COMM_DEFINE_KERNELS(BHalf, bf16)
COMM_DEFINE_KERNELS(int32_t, i32)
COMM_DEFINE_KERNELS(int64_t, i64)
COMM_DEFINE_KERNELS(uint8_t, u8)

// Indexed by DType, then by ReduceOp.
constexpr const Kernel* kKernels[kNumDTypes] = {f32_kernels, f64_kernels, f16_kernels, bf16_kernels,
                                                i32_kernels, i64_kernels, u8_kernels};

// x / d for a power of two d is x * (1 / d) bit for bit (both round the same exact value), and a
// multiply vectorises at full width where a divide is slow; DDP's avg divides by the world size.
template <typename T>
COMM_INLINE void divide_loop(void* buf, size_t n, int divisor) {
  T* p = static_cast<T*>(buf);
  bool power_of_two = (divisor & (divisor - 1)) == 0;
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BHalf>) {
    float d = float(divisor), s = 1.0f / d;
    if (power_of_two) {
      for (size_t i = 0; i < n; ++i) store(p + i, load(p + i) * s);
    } else {
      for (size_t i = 0; i < n; ++i) store(p + i, load(p + i) / d);
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    T d = T(divisor), s = T(1) / d;
    if (power_of_two) {
      for (size_t i = 0; i < n; ++i) p[i] *= s;
    } else {
      for (size_t i = 0; i < n; ++i) p[i] /= d;
    }
  } else {
    // In 64 bits: T(divisor) would wrap for a u8 (256 ranks: a division by zero).
    for (size_t i = 0; i < n; ++i) p[i] = T(int64_t(p[i]) / int64_t(divisor));
  }
}

using DivideKernel = void (*)(void*, size_t, int);
#define COMM_DEFINE_DIVIDE(T, name)                                 \
  COMM_SIMD_CLONES void name##_divide(void* buf, size_t n, int d) { \
    divide_loop<T>(buf, n, d);                                      \
  }
COMM_DEFINE_DIVIDE(float, f32)
COMM_DEFINE_DIVIDE(double, f64)
COMM_DEFINE_DIVIDE(Half, f16)
COMM_DEFINE_DIVIDE(BHalf, bf16)
COMM_DEFINE_DIVIDE(int32_t, i32)
COMM_DEFINE_DIVIDE(int64_t, i64)
COMM_DEFINE_DIVIDE(uint8_t, u8)

// Indexed by DType.
constexpr DivideKernel kDivide[kNumDTypes] = {f32_divide, f64_divide, f16_divide, bf16_divide,
                                              i32_divide, i64_divide, u8_divide};

// reduce_into_two(): the op and avg's divide in one pass, where reduce() and divide_by() took
// two (a profile of a DDP rank had the divide at a third of the sum's time). Each value is
// rounded to T after the op and then divided exactly as divide_loop() does, so the result is
// bit for bit theirs. The copy stays a memcpy: its rep movsb writes whole lines without
// reading them first, where stores from this loop made the peer's buffer 3-6x slower to fill.
template <typename T>
COMM_INLINE T rounded(decltype(load(static_cast<const T*>(nullptr))) v) {
  T t;
  store(&t, v);
  return t;
}

template <typename T, bool kMultiply>
COMM_INLINE T divided(T t, int divisor) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BHalf>) {
    float f = load(&t);
    return rounded<T>(kMultiply ? f * (1.0f / float(divisor)) : f / float(divisor));
  } else if constexpr (std::is_floating_point_v<T>) {
    return kMultiply ? t * (T(1) / T(divisor)) : t / T(divisor);
  } else {
    return T(int64_t(t) / int64_t(divisor));
  }
}

// How loop_into_two() finishes each value: as it is (not avg), or as divide_loop() does.
enum class Finish { kNone, kMultiplyByReciprocal, kDivide };

template <typename T, typename Op, Finish kFinish>
COMM_INLINE void loop_into_two(void* dst, void* copy, const void* lhs, const void* rhs, size_t n,
                               int divisor) {
  T* x = static_cast<T*>(dst);
  const T* a = static_cast<const T*>(lhs);
  const T* b = static_cast<const T*>(rhs);
  for (size_t i = 0; i < n; ++i) {
    T t = rounded<T>(Op::apply(load(a + i), load(b + i)));
    if constexpr (kFinish != Finish::kNone) {
      t = divided<T, kFinish == Finish::kMultiplyByReciprocal>(t, divisor);
    }
    x[i] = t;
  }
  std::memcpy(copy, dst, n * sizeof(T));
}

using TwoKernel = void (*)(void*, void*, const void*, const void*, size_t, int);

#define COMM_DEFINE_INTO_TWO(T, name)                                                         \
  COMM_SIMD_CLONES void name##_sum2(void* x, void* y, const void* a, const void* b, size_t n, \
                                    int) {                                                    \
    loop_into_two<T, Sum, Finish::kNone>(x, y, a, b, n, 1);                                   \
  }                                                                                           \
  COMM_SIMD_CLONES void name##_avg2(void* x, void* y, const void* a, const void* b, size_t n, \
                                    int d) {                                                  \
    if ((d & (d - 1)) == 0) {                                                                 \
      loop_into_two<T, Sum, Finish::kMultiplyByReciprocal>(x, y, a, b, n, d);                 \
    } else {                                                                                  \
      loop_into_two<T, Sum, Finish::kDivide>(x, y, a, b, n, d);                               \
    }                                                                                         \
  }                                                                                           \
  constexpr TwoKernel name##_into_two[2] = {name##_sum2, name##_avg2};

COMM_DEFINE_INTO_TWO(float, f32)
COMM_DEFINE_INTO_TWO(double, f64)
COMM_DEFINE_INTO_TWO(Half, f16)
COMM_DEFINE_INTO_TWO(BHalf, bf16)
COMM_DEFINE_INTO_TWO(int32_t, i32)
COMM_DEFINE_INTO_TWO(int64_t, i64)
COMM_DEFINE_INTO_TWO(uint8_t, u8)

// Indexed by DType, then by sum (0) or avg (1).
constexpr const TwoKernel* kIntoTwo[kNumDTypes] = {f32_into_two,  f64_into_two, f16_into_two,
                                                   bf16_into_two, i32_into_two, i64_into_two,
                                                   u8_into_two};

}  // namespace

void reduce(DType dtype, ReduceOp op, void* dst, const void* lhs, const void* rhs, size_t count) {
  check_dtype(dtype, "reduce");
  check_reduce_op(op, "reduce");
  if (count == 0) return;
  kKernels[int(dtype)][int(op)](dst, lhs, rhs, count);
}

void divide_by(DType dtype, void* buf, size_t count, int divisor) {
  COHORT_CHECK_ARG(divisor > 0, "divide_by: divisor must be positive, got ", divisor);
  check_dtype(dtype, "divide_by");
  kDivide[int(dtype)](buf, count, divisor);
}

void reduce_into_two(DType dtype, ReduceOp op, void* dst, void* copy, const void* lhs,
                     const void* rhs, size_t count, int divisor) {
  check_dtype(dtype, "reduce_into_two");
  check_reduce_op(op, "reduce_into_two");
  COHORT_CHECK_ARG(divisor > 0, "reduce_into_two: divisor must be positive, got ", divisor);
  if (count == 0) return;
  if (op == ReduceOp::sum || op == ReduceOp::avg) {
    kIntoTwo[int(dtype)][op == ReduceOp::avg](dst, copy, lhs, rhs, count, divisor);
    return;
  }
  // min, max, prod: rare in training; the two passes they took before.
  reduce(dtype, op, dst, lhs, rhs, count);
  std::memcpy(copy, dst, count * dtype_size(dtype));
}

}  // namespace cohort::comm
