#include "cohort/core/dtype.h"

#include "cohort/core/error.h"

namespace cohort {
namespace {

struct DTypeInfo {
  size_t size;
  const char* name;
  const char* short_name;
};

// Indexed by the enumerator's value.
constexpr DTypeInfo kInfo[kNumDTypes] = {
    {4, "float32", "f32"}, {8, "float64", "f64"}, {2, "float16", "f16"}, {2, "bfloat16", "bf16"},
    {4, "int32", "i32"},   {8, "int64", "i64"},   {1, "uint8", "u8"},
};

}  // namespace

void check_dtype(DType t, const char* what) {
  COHORT_CHECK_ARG(uint8_t(t) < kNumDTypes, what, ": unknown dtype ", int(uint8_t(t)),
                   " (expected 0..", kNumDTypes - 1, ")");
}

size_t dtype_size(DType t) {
  check_dtype(t, "dtype_size");
  return kInfo[uint8_t(t)].size;
}

const char* dtype_name(DType t) {
  return uint8_t(t) < kNumDTypes ? kInfo[uint8_t(t)].name : "?";
}

const char* dtype_short_name(DType t) {
  return uint8_t(t) < kNumDTypes ? kInfo[uint8_t(t)].short_name : "?";
}

}  // namespace cohort
