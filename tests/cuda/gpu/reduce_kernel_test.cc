// kernels/cuda/reduce against kernels/cpu (sum_middle; sum_rows and fill_rows of gemm.h) on
// random inputs of odd shapes, and against an exact (double) sum: the GPU adds in double, so it
// is within one float rounding of the exact sum, tighter than the CPU.
#include "cohort/kernels/cuda/reduce.h"

#include <sstream>

#include "cohort/kernels/cpu/gemm.h"
#include "cohort/kernels/cpu/reduce.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::cuda {
namespace {

using testing::all_close;
using testing::random_floats;

struct Middle {
  int64_t outer, r, inner;
};
// Rows (inner 1) short and long, one long row, columns of one and of several slices, r of 1,
// and r of 0 (zeros).
constexpr Middle kMiddle[] = {{37, 1000, 1}, {1, 50257, 1}, {37, 1, 1},   {37, 31, 1},
                              {3, 31, 37},   {1, 1000, 31}, {5, 4097, 3}, {5, 0, 3}};

// x [outer, r, inner] -> [outer, inner] summed over r in double.
std::vector<float> exact_sum_middle(const std::vector<float>& x, Middle s) {
  std::vector<float> out(size_t(s.outer * s.inner));
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      double acc = 0;
      for (int64_t j = 0; j < s.r; ++j) acc += x[size_t((o * s.r + j) * s.inner + i)];
      out[size_t(o * s.inner + i)] = float(acc);
    }
  return out;
}

std::string name(Middle s) {
  std::ostringstream os;  // (not "[" + std::string: gcc 12 warns falsely, -Wrestrict)
  os << "[" << s.outer << ", " << s.r << ", " << s.inner << "]";
  return os.str();
}

TEST(CudaReduce, SumMiddleMatchesCpuAndTheExactSum) {
  COHORT_REQUIRE_GPU();
  for (Middle s : kMiddle) {
    const auto x = random_floats(size_t(s.outer * s.r * s.inner), 50 + uint32_t(s.r));
    // Garbage in the output: r == 0 must write zeros, not leave it.
    DeviceArray<float> dx(x), dout(std::vector<float>(size_t(s.outer * s.inner), 9.f));
    std::vector<float> want(size_t(s.outer * s.inner));
    sum_middle(dx.data(), s.outer, s.r, s.inner, dout.data(), nullptr);
    cpu::sum_middle(x.data(), s.outer, s.r, s.inner, want.data());
    const auto got = dout.download();
    // The CPU's float blocks err by up to ~1e-7 * r in absolute terms (inputs in [-2, 2]).
    EXPECT_TRUE(all_close(got, want, 1e-5f, 1e-5f + 2e-7f * float(s.r))) << "CPU, " << name(s);
    EXPECT_TRUE(all_close(got, exact_sum_middle(x, s), 2e-7f, 1e-6f)) << "exact, " << name(s);
  }
}

TEST(CudaReduce, SumRowsMatchesCpu) {
  COHORT_REQUIRE_GPU();
  struct Rows {
    int64_t rows, cols;
  };
  for (Rows s :
       {Rows{37, 1}, Rows{37, 31}, Rows{37, 1000}, Rows{1000, 37}, Rows{1, 50257}, Rows{0, 5}}) {
    const auto g = random_floats(size_t(s.rows * s.cols), 60 + uint32_t(s.cols));
    DeviceArray<float> dg(g), dout(std::vector<float>(size_t(s.cols), 9.f));
    std::vector<float> want(size_t(s.cols));
    sum_rows(dg.data(), s.rows, s.cols, dout.data(), nullptr);
    cpu::sum_rows(g.data(), s.rows, s.cols, want.data());
    const auto got = dout.download();
    EXPECT_TRUE(all_close(got, want, 1e-5f, 1e-5f + 2e-7f * float(s.rows)))
        << "rows " << s.rows << ", cols " << s.cols;
    EXPECT_TRUE(all_close(got, exact_sum_middle(g, {1, s.rows, s.cols}), 2e-7f, 1e-6f))
        << "exact, rows " << s.rows << ", cols " << s.cols;
  }
}

TEST(CudaReduce, FillRowsBroadcastsTheBias) {
  COHORT_REQUIRE_GPU();
  for (int64_t cols : {int64_t{1}, int64_t{31}, int64_t{1000}}) {
    const int64_t rows = 37;
    const auto bias = random_floats(size_t(cols), 70 + uint32_t(cols));
    DeviceArray<float> db(bias), dy(size_t(rows * cols));
    std::vector<float> want(size_t(rows * cols));
    fill_rows(dy.data(), db.data(), rows, cols, nullptr);
    cpu::fill_rows(want.data(), bias.data(), rows, cols);
    EXPECT_TRUE(all_close(dy.download(), want, 0, 0)) << "cols " << cols;
  }
}

// More slices than a grid's y dimension holds (65535): the column kernel strides over them.
TEST(CudaReduce, SumMiddleCoversManyOuterSlices) {
  COHORT_REQUIRE_GPU();
  const Middle s{70001, 3, 2};
  const auto x = random_floats(size_t(s.outer * s.r * s.inner), 80);
  DeviceArray<float> dx(x), dout(size_t(s.outer * s.inner));
  sum_middle(dx.data(), s.outer, s.r, s.inner, dout.data(), nullptr);
  EXPECT_TRUE(all_close(dout.download(), exact_sum_middle(x, s), 2e-7f, 1e-6f));
}

// No atomics: the same bits on every run.
TEST(CudaReduce, RepeatedRunsAreBitIdentical) {
  COHORT_REQUIRE_GPU();
  const auto x = random_floats(size_t(37 * 50257), 90);
  DeviceArray<float> dx(x), drow(37), dcol(50257);
  sum_middle(dx.data(), 37, 50257, 1, drow.data(), nullptr);
  sum_rows(dx.data(), 37, 50257, dcol.data(), nullptr);
  const auto row = drow.download(), col = dcol.download();
  for (int run = 0; run < 3; ++run) {
    sum_middle(dx.data(), 37, 50257, 1, drow.data(), nullptr);
    sum_rows(dx.data(), 37, 50257, dcol.data(), nullptr);
    EXPECT_TRUE(drow.download() == row) << "run " << run;
    EXPECT_TRUE(dcol.download() == col) << "run " << run;
  }
}

}  // namespace
}  // namespace cohort::cuda
