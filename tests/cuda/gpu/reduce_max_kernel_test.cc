// kernels/cuda/reduce_max against cpu::max_middle / max_middle_backward: values and first
// positions exactly, on rows (inner == 1) and columns (inner > 1), with ties, NaNs and -inf.
#include "cohort/kernels/cuda/reduce_max.h"

#include <cmath>
#include <random>
#include <sstream>

#include "cohort/kernels/cpu/reduce.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::cuda {
namespace {

using testing::random_floats;

// Exactly equal (==, so +0 and -0 tie as in the CPU's row scan, and -inf equals -inf), or both
// NaN; names the first mismatch.
::testing::AssertionResult same_values(const std::vector<float>& got,
                                       const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))))
      return ::testing::AssertionFailure()
             << "element " << i << ": GPU " << got[i] << ", CPU " << want[i];
  return ::testing::AssertionSuccess();
}

struct Middle {
  int64_t outer, r, inner;
};
// Rows short and long (one block's threads each take several), one very long row, r of 1,
// columns of one and of several slices, r not a multiple of the 8 row groups.
constexpr Middle kShapes[] = {{37, 1000, 1}, {1, 50257, 1}, {37, 1, 1},   {37, 31, 1},
                              {3, 31, 37},   {1, 1000, 31}, {5, 4097, 3}, {70000, 3, 2}};

std::string name(Middle s) {
  std::ostringstream os;
  os << "[" << s.outer << ", " << s.r << ", " << s.inner << "]";
  return os.str();
}

// Random values with planted ties, NaNs and a few all -inf outputs.
std::vector<float> hard_input(Middle s, uint32_t seed, bool with_nan) {
  auto x = random_floats(size_t(s.outer * s.r * s.inner), seed, -4.f, 4.f);
  std::mt19937 rng(seed);
  for (float& v : x) {
    const uint32_t u = rng() % 64;
    if (u < 6) v = 3.75f;  // a tie at a likely maximum
    if (u == 6) v = 4.f;   // and at the largest value
    if (with_nan && u == 7) v = NAN;
  }
  if (s.outer > 1 && s.inner == 1)  // row 1 all -inf: position 0
    for (int64_t j = 0; j < s.r; ++j) x[size_t(s.r + j)] = -INFINITY;
  return x;
}

void check_forward(Middle s, bool with_nan) {
  const auto x = hard_input(s, uint32_t(s.r + s.inner), with_nan);
  const size_t outs = size_t(s.outer * s.inner);
  std::vector<float> want_val(outs);
  std::vector<int64_t> want_idx(outs);
  cpu::max_middle(x.data(), s.outer, s.r, s.inner, want_val.data(), want_idx.data());
  DeviceArray<float> dx(x), dval(outs);
  DeviceArray<int64_t> didx(outs);
  max_middle(dx.data(), s.outer, s.r, s.inner, dval.data(), didx.data(), nullptr);
  EXPECT_TRUE(same_values(dval.download(), want_val)) << name(s) << " nan " << with_nan;
  EXPECT_EQ(didx.download(), want_idx) << name(s) << " nan " << with_nan;
  // idx may be null.
  max_middle(dx.data(), s.outer, s.r, s.inner, dval.data(), nullptr, nullptr);
  EXPECT_TRUE(same_values(dval.download(), want_val)) << name(s) << " without idx";
}

TEST(CudaReduceMax, MatchesCpuWithTiesAndNaN) {
  COHORT_REQUIRE_GPU();
  for (Middle s : kShapes) {
    check_forward(s, false);
    check_forward(s, true);
  }
}

TEST(CudaReduceMax, BackwardRoutesGradientToTheChosenPosition) {
  COHORT_REQUIRE_GPU();
  for (Middle s : kShapes) {
    const auto x = hard_input(s, 3, true);
    const size_t outs = size_t(s.outer * s.inner);
    std::vector<float> val(outs);
    std::vector<int64_t> idx(outs);
    cpu::max_middle(x.data(), s.outer, s.r, s.inner, val.data(), idx.data());
    const auto g = random_floats(outs, 4);
    std::vector<float> want(x.size());
    cpu::max_middle_backward(g.data(), idx.data(), s.outer, s.r, s.inner, want.data());
    DeviceArray<float> dg(g), ddx(x.size());
    DeviceArray<int64_t> didx(idx);
    max_middle_backward(dg.data(), didx.data(), s.outer, s.r, s.inner, ddx.data(), nullptr);
    EXPECT_TRUE(same_values(ddx.download(), want)) << name(s);
  }
}

// The same call twice gives the same bits (no atomics, no order that depends on scheduling).
TEST(CudaReduceMax, Deterministic) {
  COHORT_REQUIRE_GPU();
  const Middle s{1, 1 << 20, 1};
  const auto x = hard_input(s, 9, false);
  DeviceArray<float> dx(x), dval(1);
  DeviceArray<int64_t> a(1), b(1);
  max_middle(dx.data(), s.outer, s.r, s.inner, dval.data(), a.data(), nullptr);
  max_middle(dx.data(), s.outer, s.r, s.inner, dval.data(), b.data(), nullptr);
  EXPECT_EQ(a.download(), b.download());
}

}  // namespace
}  // namespace cohort::cuda
