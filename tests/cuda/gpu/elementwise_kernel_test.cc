// kernels/cuda/elementwise against kernels/cpu/elementwise on random inputs of odd sizes.
#include "cohort/kernels/cuda/elementwise.h"

#include "cohort/kernels/cpu/elementwise.h"
#include "cohort/kernels/cpu/reduce.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::cuda {
namespace {

using testing::all_close;
using testing::random_floats;

TEST(CudaElementwise, BinaryWithBroadcastingMatchesCpu) {
  COHORT_REQUIRE_GPU();
  const int64_t rows = 37, n = 1001;
  const auto a = random_floats(rows * n, 1), b_row = random_floats(n, 2, 0.5f, 2.f),
             b_col = random_floats(rows, 3, 0.5f, 2.f);
  DeviceArray<float> da(a), dbr(b_row), dbc(b_col), dout(rows * n);
  std::vector<float> want(rows * n);
  for (int op = 0; op < 4; ++op) {
    // [rows, n] op [n] (row broadcast) and [rows, n] op [rows, 1] (column broadcast).
    binary_2d(math::Binary(op), rows, n, da.data(), n, 1, dbr.data(), 0, 1, dout.data(), nullptr);
    cpu::binary_2d(cpu::BinaryOp(op), rows, n, a.data(), n, 1, b_row.data(), 0, 1, want.data());
    EXPECT_TRUE(all_close(dout.download(), want, 1e-6f, 0)) << "op " << op << ", row broadcast";
    binary_2d(math::Binary(op), rows, n, da.data(), n, 1, dbc.data(), 1, 0, dout.data(), nullptr);
    cpu::binary_2d(cpu::BinaryOp(op), rows, n, a.data(), n, 1, b_col.data(), 1, 0, want.data());
    EXPECT_TRUE(all_close(dout.download(), want, 1e-6f, 0)) << "op " << op << ", column broadcast";
  }
}

TEST(CudaElementwise, UnaryAndBackwardMatchCpu) {
  COHORT_REQUIRE_GPU();
  const int64_t n = 100003;
  const auto x = random_floats(n, 4, -6.f, 6.f), g = random_floats(n, 5);
  DeviceArray<float> dx(x), dg(g), dout(n);
  std::vector<float> want(n);
  for (int op = 0; op < 7; ++op) {
    const bool positive_only = op >= 5;  // log, sqrt
    std::vector<float> in = x;
    if (positive_only)
      for (float& v : in) v = std::fabs(v) + 1e-3f;
    DeviceArray<float> din(in);
    unary(math::Unary(op), din.data(), dout.data(), n, nullptr);
    cpu::unary(cpu::UnaryOp(op), in.data(), want.data(), n);
    EXPECT_TRUE(all_close(dout.download(), want, 2e-6f, 1e-6f)) << "unary op " << op;
  }
  gelu_backward(dx.data(), dg.data(), dout.data(), n, nullptr);
  cpu::gelu_backward(x.data(), g.data(), want.data(), n);
  EXPECT_TRUE(all_close(dout.download(), want, 1e-5f, 1e-6f)) << "gelu_backward";
  relu_backward(dx.data(), dg.data(), dout.data(), n, nullptr);
  cpu::relu_backward(x.data(), g.data(), want.data(), n);
  EXPECT_TRUE(all_close(dout.download(), want, 0, 0)) << "relu_backward";
}

TEST(CudaElementwise, UnaryBackwardPowAndBroadcastMatchCpu) {
  COHORT_REQUIRE_GPU();
  const int64_t n = 30011;
  const auto y = random_floats(n, 8, 0.05f, 0.95f), g = random_floats(n, 9);
  DeviceArray<float> dy(y), dg(g), dout(n);
  std::vector<float> want(n);
  unary_backward(math::UnaryGrad::kTanh, dy.data(), dg.data(), dout.data(), n, nullptr);
  cpu::tanh_backward(y.data(), g.data(), want.data(), n);
  EXPECT_TRUE(all_close(dout.download(), want, 1e-6f, 1e-7f)) << "tanh";
  unary_backward(math::UnaryGrad::kSigmoid, dy.data(), dg.data(), dout.data(), n, nullptr);
  cpu::sigmoid_backward(y.data(), g.data(), want.data(), n);
  EXPECT_TRUE(all_close(dout.download(), want, 1e-6f, 1e-7f)) << "sigmoid";
  unary_backward(math::UnaryGrad::kSqrt, dy.data(), dg.data(), dout.data(), n, nullptr);
  cpu::sqrt_backward(y.data(), g.data(), want.data(), n);
  EXPECT_TRUE(all_close(dout.download(), want, 1e-6f, 1e-7f)) << "sqrt";
  for (float p : {2.f, 0.5f, -1.5f}) {
    pow_scalar(dy.data(), p, dout.data(), n, nullptr);
    cpu::pow_scalar(y.data(), p, want.data(), n);
    EXPECT_TRUE(all_close(dout.download(), want, 2e-6f, 0)) << "pow " << p;
    pow_scalar_backward(dy.data(), p, dg.data(), dout.data(), n, nullptr);
    cpu::pow_scalar_backward(y.data(), p, g.data(), want.data(), n);
    EXPECT_TRUE(all_close(dout.download(), want, 1e-5f, 1e-7f)) << "pow backward " << p;
  }
  const int64_t outer = 7, r = 13, inner = 333;
  const auto gs = random_floats(outer * inner, 10);
  DeviceArray<float> dgs(gs), dbig(outer * r * inner);
  std::vector<float> big(outer * r * inner);
  broadcast_middle(dgs.data(), outer, r, inner, 0.25f, dbig.data(), nullptr);
  cpu::broadcast_middle(gs.data(), outer, r, inner, 0.25f, big.data());
  EXPECT_TRUE(all_close(dbig.download(), big, 0, 0)) << "broadcast_middle";
}

TEST(CudaElementwise, Bf16RoundTripMatchesTheHostRounding) {
  COHORT_REQUIRE_GPU();
  const int64_t n = 4099;
  auto x = random_floats(n, 6, -1e4f, 1e4f);
  x[0] = INFINITY, x[1] = -INFINITY, x[2] = NAN, x[3] = 3.3895314e38f;  // past bf16's largest
  DeviceArray<float> dx(x), dback(n);
  DeviceArray<uint16_t> dbf(n);
  f32_to_bf16(dx.data(), dbf.data(), n, nullptr);
  bf16_to_f32(dbf.data(), dback.data(), n, nullptr);
  const auto bits = dbf.download();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bits[i], math::bf16_from_f32(x[i])) << "element " << i;
  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = math::f32_from_bf16(math::bf16_from_f32(x[i]));
  EXPECT_TRUE(all_close(dback.download(), want, 0, 0));
}

TEST(CudaElementwise, AffineAndFillMatchCpu) {
  COHORT_REQUIRE_GPU();
  const int64_t n = 777;
  const auto x = random_floats(n, 7);
  DeviceArray<float> dx(x), dout(n);
  affine(dx.data(), -1.5f, 0.25f, dout.data(), n, nullptr);
  std::vector<float> want(n);
  cpu::affine(x.data(), -1.5f, 0.25f, want.data(), n);
  EXPECT_TRUE(all_close(dout.download(), want, 0, 0));
  fill(dout.data(), 3.f, n, nullptr);
  EXPECT_TRUE(all_close(dout.download(), std::vector<float>(n, 3.f), 0, 0));
}

TEST(CudaRuntime, ErrorsNameTheCallAndCudasReason) {
  COHORT_REQUIRE_GPU();
  // An impossible allocation: CudaError naming the call and "out of memory".
  try {
    DeviceArray<float> huge(size_t{1} << 50);
    FAIL() << "a 4 PiB allocation succeeded";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMalloc"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cohort::cuda
