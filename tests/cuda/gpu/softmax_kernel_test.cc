// kernels/cuda/softmax against kernels/cpu/softmax on random rows of odd lengths, up to a GPT-2
// vocabulary (50257): one block per row must cover rows shorter than a warp and far longer
// than a block. Special rows (masked -inf entries, all -inf, a NaN) check the edge semantics.
#include "cohort/kernels/cuda/softmax.h"

#include "cohort/kernels/cpu/softmax.h"
#include "cohort/kernels/cuda/embedding.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::cuda {
namespace {

using testing::all_close;
using testing::random_floats;

constexpr int64_t kRows = 37;
constexpr int64_t kCols[] = {1, 31, 1000, 50257};

// all_close, with equal infinities (log_softmax of a masked entry is -inf on both) counted as
// equal: they are set to 0 in both before comparing.
::testing::AssertionResult close_or_same_inf(std::vector<float> got, std::vector<float> want,
                                             float rtol, float atol) {
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    if (std::isinf(got[i]) && got[i] == want[i]) got[i] = want[i] = 0.f;
  return all_close(got, want, rtol, atol);
}

// x [rows, cols] in [-8, 8]; with `special`, row 1 masks every other entry (-inf), row 2 is all
// -inf (NaN out) and row 3 holds one NaN (NaN out), where cols allows.
std::vector<float> logits(int64_t rows, int64_t cols, uint32_t seed, bool special) {
  auto x = random_floats(size_t(rows * cols), seed, -8.f, 8.f);
  if (!special || rows < 4) return x;
  if (cols > 1)
    for (int64_t i = 0; i < cols; i += 2) x[size_t(cols + i)] = -INFINITY;
  for (int64_t i = 0; i < cols; ++i) x[size_t(2 * cols + i)] = -INFINITY;
  x[size_t(3 * cols + cols / 2)] = NAN;
  return x;
}

TEST(CudaSoftmax, ForwardMatchesCpu) {
  COHORT_REQUIRE_GPU();
  for (int64_t cols : kCols) {
    const auto x = logits(kRows, cols, 1 + uint32_t(cols), true);
    DeviceArray<float> dx(x), dy(x.size());
    std::vector<float> want(x.size());
    softmax_rows(dx.data(), kRows, cols, dy.data(), nullptr);
    cpu::softmax_rows(x.data(), kRows, cols, want.data());
    EXPECT_TRUE(close_or_same_inf(dy.download(), want, 1e-5f, 1e-9f)) << "softmax, cols " << cols;
    log_softmax_rows(dx.data(), kRows, cols, dy.data(), nullptr);
    cpu::log_softmax_rows(x.data(), kRows, cols, want.data());
    EXPECT_TRUE(close_or_same_inf(dy.download(), want, 1e-5f, 1e-5f))
        << "log_softmax, cols " << cols;
  }
}

// Row sums of softmax are 1 even for a row far longer than the block (1024 threads).
TEST(CudaSoftmax, LongRowsSumToOne) {
  COHORT_REQUIRE_GPU();
  const int64_t rows = 3, cols = 50257 * 2 + 1;
  const auto x = random_floats(size_t(rows * cols), 2, -30.f, 30.f);
  DeviceArray<float> dx(x), dy(x.size());
  softmax_rows(dx.data(), rows, cols, dy.data(), nullptr);
  const auto y = dy.download();
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t i = 0; i < cols; ++i) s += y[size_t(r * cols + i)];
    EXPECT_NEAR(s, 1.0, 1e-4) << "row " << r;
  }
}

TEST(CudaSoftmax, BackwardMatchesCpu) {
  COHORT_REQUIRE_GPU();
  for (int64_t cols : kCols) {
    const auto x = logits(kRows, cols, 3 + uint32_t(cols), false);
    const auto g = random_floats(x.size(), 4 + uint32_t(cols));
    std::vector<float> y(x.size()), logy(x.size()), want(x.size());
    cpu::softmax_rows(x.data(), kRows, cols, y.data());
    cpu::log_softmax_rows(x.data(), kRows, cols, logy.data());
    DeviceArray<float> dy(y), dlogy(logy), dg(g), ddx(x.size());
    softmax_backward_rows(dy.data(), dg.data(), kRows, cols, ddx.data(), nullptr);
    cpu::softmax_backward_rows(y.data(), g.data(), kRows, cols, want.data());
    EXPECT_TRUE(all_close(ddx.download(), want, 1e-4f, 1e-6f)) << "softmax, cols " << cols;
    log_softmax_backward_rows(dlogy.data(), dg.data(), kRows, cols, ddx.data(), nullptr);
    cpu::log_softmax_backward_rows(logy.data(), g.data(), kRows, cols, want.data());
    EXPECT_TRUE(all_close(ddx.download(), want, 1e-4f, 1e-5f)) << "log_softmax, cols " << cols;
  }
}

// targets [n] in [0, c), seeded.
std::vector<int64_t> random_targets(int64_t n, int64_t c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(0, c - 1);
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (int64_t& v : t) v = d(rng);
  return t;
}

TEST(CudaCrossEntropy, ForwardAndBackwardMatchCpu) {
  COHORT_REQUIRE_GPU();
  for (int64_t c : kCols) {
    const auto x = random_floats(size_t(kRows * c), 5 + uint32_t(c), -10.f, 10.f);
    const auto t = random_targets(kRows, c, 6 + uint32_t(c));
    DeviceArray<float> dx(x), dstats(size_t(2 * kRows)), dgrad(x.size());
    DeviceArray<int64_t> dt(t);
    DeviceArray<double> dloss(1);
    std::vector<float> stats(size_t(2 * kRows)), grad(x.size());
    cross_entropy_forward(dx.data(), dt.data(), kRows, c, dstats.data(), dloss.data(), nullptr);
    const double want = cpu::cross_entropy_forward(x.data(), t.data(), kRows, c, stats.data());
    // Stats: the max is exact; the log-sum within float rounding (0 exactly for c == 1).
    EXPECT_TRUE(all_close(dstats.download(), stats, 1e-5f, 1e-6f)) << "stats, c " << c;
    EXPECT_NEAR(dloss.download()[0], want, 1e-5 * std::fabs(want) + 1e-5) << "loss, c " << c;
    // Mean reduction: scale = dL/dloss / n.
    const float scale = 1.f / float(kRows);
    cross_entropy_backward(dx.data(), dt.data(), dstats.data(), kRows, c, scale, dgrad.data(),
                           nullptr);
    cpu::cross_entropy_backward(x.data(), t.data(), stats.data(), kRows, c, scale, grad.data());
    EXPECT_TRUE(all_close(dgrad.download(), grad, 1e-5f, 1e-7f)) << "grad, c " << c;
  }
}

TEST(CudaCrossEntropy, NoRowsGiveZeroLoss) {
  COHORT_REQUIRE_GPU();
  DeviceArray<double> dloss(std::vector<double>{123.0});
  cross_entropy_forward(nullptr, nullptr, 0, 10, nullptr, dloss.data(), nullptr);
  EXPECT_EQ(dloss.download()[0], 0.0);
}

// A target out of [0, c) is never read past: the loss is NaN, backward subtracts nothing for
// that row, and first_out_of_range names its position.
TEST(CudaCrossEntropy, OutOfRangeTargetGivesNaNLossNotACrash) {
  COHORT_REQUIRE_GPU();
  const int64_t n = 5, c = 31;
  const auto x = random_floats(size_t(n * c), 7);
  const std::vector<int64_t> t = {3, 30, 31, -1, 0};
  DeviceArray<float> dx(x), dstats(size_t(2 * n)), dgrad(x.size());
  DeviceArray<int64_t> dt(t), dfirst(1);
  DeviceArray<double> dloss(1);
  cross_entropy_forward(dx.data(), dt.data(), n, c, dstats.data(), dloss.data(), nullptr);
  EXPECT_TRUE(std::isnan(dloss.download()[0]));
  cross_entropy_backward(dx.data(), dt.data(), dstats.data(), n, c, 1.f, dgrad.data(), nullptr);
  const auto grad = dgrad.download();
  double row2 = 0;  // target 31: softmax alone, summing to 1
  for (int64_t i = 0; i < c; ++i) row2 += grad[size_t(2 * c + i)];
  EXPECT_NEAR(row2, 1.0, 1e-5);
  first_out_of_range(dt.data(), n, c, dfirst.data(), nullptr);
  EXPECT_EQ(dfirst.download()[0], 2);
}

// The same inputs give the same bits: the reductions have a fixed shape.
TEST(CudaSoftmax, RepeatedRunsAreBitIdentical) {
  COHORT_REQUIRE_GPU();
  const int64_t c = 50257;
  const auto x = random_floats(size_t(kRows * c), 8, -10.f, 10.f);
  const auto t = random_targets(kRows, c, 9);
  DeviceArray<float> dx(x), dy(x.size()), dstats(size_t(2 * kRows));
  DeviceArray<int64_t> dt(t);
  DeviceArray<double> dloss(1);
  softmax_rows(dx.data(), kRows, c, dy.data(), nullptr);
  const auto first = dy.download();
  cross_entropy_forward(dx.data(), dt.data(), kRows, c, dstats.data(), dloss.data(), nullptr);
  const double loss = dloss.download()[0];
  for (int run = 0; run < 3; ++run) {
    softmax_rows(dx.data(), kRows, c, dy.data(), nullptr);
    EXPECT_TRUE(dy.download() == first) << "run " << run;
    cross_entropy_forward(dx.data(), dt.data(), kRows, c, dstats.data(), dloss.data(), nullptr);
    EXPECT_EQ(dloss.download()[0], loss) << "run " << run;
  }
}

}  // namespace
}  // namespace cohort::cuda
