// kernels/cuda/attention against kernels/cpu/attention on random inputs: T around the 32-row
// tiles (1, partial tiles, exact multiples, one past), Dh below, at and past a warp (16, 64, 80)
// and the limits (7, 128), with q, k, v contiguous or as strided views into one fused qkv
// buffer [B, T, 3, H, Dh] (what ops/attention.cc passes for a permuted projection).
#include "cohort/kernels/cuda/attention.h"

#include "cohort/core/error.h"
#include "cohort/kernels/cpu/attention.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::cuda {
namespace {

using testing::all_close;
using testing::random_floats;

enum class Layout { kContiguous, kFusedQkv };

// q, k, v of one shape in one host buffer, with the offsets and strides of the layout.
struct Qkv {
  AttnShape s;
  std::vector<float> buf;
  size_t q_off = 0, k_off = 0, v_off = 0;
  AttnStrides st;

  Qkv(AttnShape shape, Layout layout, uint32_t seed) : s(shape) {
    const int64_t n = s.b * s.h * s.t * s.dh;
    buf = random_floats(size_t(3 * n), seed);
    if (layout == Layout::kContiguous) {
      k_off = size_t(n);
      v_off = size_t(2 * n);
      st = {s.h * s.t * s.dh, s.t * s.dh, s.dh};
    } else {  // [B, T, 3, H, Dh]: q, k, v side by side in every token's row
      k_off = size_t(s.h * s.dh);
      v_off = size_t(2 * s.h * s.dh);
      st = {s.t * 3 * s.h * s.dh, s.dh, 3 * s.h * s.dh};
    }
  }
  size_t numel() const { return size_t(s.b * s.h * s.t * s.dh); }
  size_t rows() const { return size_t(s.b * s.h * s.t); }
  AttnInputs inputs(const float* base) const {
    return {base + q_off, base + k_off, base + v_off, st, st, st};
  }
};

struct Result {
  std::vector<float> out, lse, dq, dk, dv;
};

Result run_cpu(const Qkv& x, const std::vector<float>& g) {
  Result r{std::vector<float>(x.numel()), std::vector<float>(x.rows()),
           std::vector<float>(x.numel()), std::vector<float>(x.numel()),
           std::vector<float>(x.numel())};
  const AttnInputs in = x.inputs(x.buf.data());
  cpu::causal_attention_forward(x.s, in, r.out.data(), r.lse.data());
  cpu::causal_attention_backward(x.s, in, g.data(), r.lse.data(), r.dq.data(), r.dk.data(),
                                 r.dv.data());
  return r;
}

// Forward, then backward from the GPU's own lse, on the default stream.
Result run_gpu(const Qkv& x, const std::vector<float>& g) {
  DeviceArray<float> buf(x.buf), dg(g), out(x.numel()), lse(x.rows()), dq(x.numel()), dk(x.numel()),
      dv(x.numel());
  const AttnInputs in = x.inputs(buf.data());
  causal_attention_forward(x.s, in, out.data(), lse.data(), nullptr);
  causal_attention_backward(x.s, in, dg.data(), lse.data(), dq.data(), dk.data(), dv.data(),
                            nullptr);
  COHORT_CUDA_CHECK(cudaDeviceSynchronize());
  return {out.download(), lse.download(), dq.download(), dk.download(), dv.download()};
}

void expect_matches_cpu(AttnShape s, Layout layout, uint32_t seed) {
  const Qkv x(s, layout, seed);
  const auto g = random_floats(x.numel(), seed + 1000, -1.f, 1.f);
  const Result want = run_cpu(x, g), got = run_gpu(x, g);
  const std::string at = "B " + std::to_string(s.b) + ", H " + std::to_string(s.h) + ", T " +
                         std::to_string(s.t) + ", Dh " + std::to_string(s.dh) +
                         (layout == Layout::kContiguous ? ", contiguous" : ", fused qkv");
  EXPECT_TRUE(all_close(got.out, want.out, 1e-4f, 1e-5f)) << "out, " << at;
  EXPECT_TRUE(all_close(got.lse, want.lse, 1e-5f, 1e-5f)) << "lse, " << at;
  EXPECT_TRUE(all_close(got.dq, want.dq, 1e-3f, 5e-5f)) << "dq, " << at;
  EXPECT_TRUE(all_close(got.dk, want.dk, 1e-3f, 5e-5f)) << "dk, " << at;
  EXPECT_TRUE(all_close(got.dv, want.dv, 1e-3f, 5e-5f)) << "dv, " << at;
}

TEST(CudaAttention, MatchesCpuContiguous) {
  COHORT_REQUIRE_GPU();
  uint32_t seed = 1;
  for (int64_t t : {1, 17, 64, 130, 257})
    for (int64_t dh : {16, 64, 80}) expect_matches_cpu({2, 3, t, dh}, Layout::kContiguous, seed++);
}

TEST(CudaAttention, MatchesCpuFusedQkvViews) {
  COHORT_REQUIRE_GPU();
  uint32_t seed = 100;
  for (int64_t t : {1, 17, 64, 130, 257})
    for (int64_t dh : {16, 64, 80}) expect_matches_cpu({2, 3, t, dh}, Layout::kFusedQkv, seed++);
}

// The head-dim limits: an odd Dh smaller than a warp (lanes idle, odd smem padding) and
// Dh = 128 (four registers per lane, shared memory past 48 KiB); a long GPT-2-like sequence.
TEST(CudaAttention, MatchesCpuAtHeadDimLimitsAndLongSequences) {
  COHORT_REQUIRE_GPU();
  expect_matches_cpu({1, 2, 65, 7}, Layout::kContiguous, 200);
  expect_matches_cpu({1, 2, 95, 128}, Layout::kFusedQkv, 201);
  expect_matches_cpu({1, 2, 1024, 64}, Layout::kFusedQkv, 202);
}

// Each row's softmax sums to 1: with v all ones, every output element is 1.
TEST(CudaAttention, OutputOfConstantValuesIsThatConstant) {
  COHORT_REQUIRE_GPU();
  const AttnShape s{1, 1, 100, 64};
  Qkv x(s, Layout::kContiguous, 300);
  std::fill(x.buf.begin() + ptrdiff_t(x.v_off), x.buf.end(), 1.f);
  const Result got = run_gpu(x, std::vector<float>(x.numel(), 0.f));
  EXPECT_TRUE(all_close(got.out, std::vector<float>(x.numel(), 1.f), 1e-6f, 1e-6f));
}

// The same inputs give the same bits: no atomics, every sum in a fixed order.
TEST(CudaAttention, RepeatedRunsAreBitIdentical) {
  COHORT_REQUIRE_GPU();
  const Qkv x({2, 3, 257, 64}, Layout::kFusedQkv, 400);
  const auto g = random_floats(x.numel(), 401);
  const Result first = run_gpu(x, g);
  for (int run = 0; run < 3; ++run) {
    const Result again = run_gpu(x, g);
    EXPECT_TRUE(again.out == first.out) << "run " << run;
    EXPECT_TRUE(again.lse == first.lse) << "run " << run;
    EXPECT_TRUE(again.dq == first.dq) << "run " << run;
    EXPECT_TRUE(again.dk == first.dk) << "run " << run;
    EXPECT_TRUE(again.dv == first.dv) << "run " << run;
  }
}

// Nothing to compute is no launch; a head dim past 128 is refused before any launch.
TEST(CudaAttention, EmptyShapesAndTooWideHeads) {
  COHORT_REQUIRE_GPU();
  causal_attention_forward({2, 3, 0, 64}, {}, nullptr, nullptr, nullptr);
  causal_attention_backward({0, 3, 5, 64}, {}, nullptr, nullptr, nullptr, nullptr, nullptr,
                            nullptr);
  COHORT_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_THROW(causal_attention_forward({1, 1, 4, 129}, {}, nullptr, nullptr, nullptr),
               InvalidArgument);
  EXPECT_THROW(causal_attention_backward({1, 1, 4, 129}, {}, nullptr, nullptr, nullptr, nullptr,
                                         nullptr, nullptr),
               InvalidArgument);
}

}  // namespace
}  // namespace cohort::cuda
