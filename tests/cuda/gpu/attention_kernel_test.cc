// kernels/cuda/attention against kernels/cpu/attention on random inputs (the bf16 kernels
// against the CPU's emulation of them, at the end): T around the 32-row
// tiles (1, partial tiles, exact multiples, one past), Dh below, at and past a warp (16, 64, 80)
// and the limits (7, 128), with q, k, v contiguous or as strided views into one fused qkv
// buffer [B, T, 3, H, Dh] (what ops/attention.cc passes for a permuted projection).
#include "cohort/kernels/cuda/attention.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>

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

// ---- bf16 (train.precision = "bf16"): the tensor-core kernels against kernels/cpu's
// emulation of them (the same roundings at the same points; the sums in another order, so a p
// or ds next to a rounding boundary may round the other way: tolerances are relative to the
// largest element of each result) ----

// Every |got - want| within frac * max |want|; the failure names the worst element.
// `floor`: the least scale, for results that are exactly zero on the CPU (dq and dk with one key:
// the softmax has nothing to move) where the GPU's other summation order leaves about 1e-7
// (seen on an H200).
::testing::AssertionResult close_to_scale(const std::vector<float>& got,
                                          const std::vector<float>& want, float frac,
                                          float floor = 1e-4f) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  float scale = floor, worst = -1.f;
  size_t at = 0;
  for (float w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    const float d = std::fabs(got[i] - want[i]);
    if (!(d <= worst)) worst = d, at = i;  // NaN counts as the worst
  }
  if (got.empty() || worst <= frac * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "worst at " << at << ": GPU " << got[at] << ", CPU " << want[at] << " (|diff| " << worst
         << " > " << frac << " * " << scale << ")";
}

Result run_cpu_bf16(const Qkv& x, const std::vector<float>& g) {
  Result r{std::vector<float>(x.numel()), std::vector<float>(x.rows()),
           std::vector<float>(x.numel()), std::vector<float>(x.numel()),
           std::vector<float>(x.numel())};
  const AttnInputs in = x.inputs(x.buf.data());
  cpu::causal_attention_forward_bf16(x.s, in, r.out.data(), r.lse.data());
  cpu::causal_attention_backward_bf16(x.s, in, r.out.data(), g.data(), r.lse.data(), r.dq.data(),
                                      r.dk.data(), r.dv.data());
  return r;
}

Result run_gpu_bf16(const Qkv& x, const std::vector<float>& g) {
  DeviceArray<float> buf(x.buf), dg(g), out(x.numel()), lse(x.rows()), dq(x.numel()), dk(x.numel()),
      dv(x.numel());
  const AttnInputs in = x.inputs(buf.data());
  causal_attention_forward_bf16(x.s, in, out.data(), lse.data(), nullptr);
  causal_attention_backward_bf16(x.s, in, out.data(), dg.data(), lse.data(), dq.data(), dk.data(),
                                 dv.data(), nullptr);
  COHORT_CUDA_CHECK(cudaDeviceSynchronize());
  return {out.download(), lse.download(), dq.download(), dk.download(), dv.download()};
}

void expect_bf16_matches_cpu(AttnShape s, Layout layout, uint32_t seed) {
  const Qkv x(s, layout, seed);
  const auto g = random_floats(x.numel(), seed + 1000, -1.f, 1.f);
  const Result want = run_cpu_bf16(x, g), got = run_gpu_bf16(x, g);
  const std::string at = "B " + std::to_string(s.b) + ", H " + std::to_string(s.h) + ", T " +
                         std::to_string(s.t) + ", Dh " + std::to_string(s.dh) +
                         (layout == Layout::kContiguous ? ", contiguous" : ", fused qkv");
  EXPECT_TRUE(close_to_scale(got.out, want.out, 2e-2f)) << "out, " << at;
  EXPECT_TRUE(close_to_scale(got.lse, want.lse, 1e-4f)) << "lse (no rounding past q, k), " << at;
  EXPECT_TRUE(close_to_scale(got.dq, want.dq, 2e-2f)) << "dq, " << at;
  EXPECT_TRUE(close_to_scale(got.dk, want.dk, 2e-2f)) << "dk, " << at;
  EXPECT_TRUE(close_to_scale(got.dv, want.dv, 2e-2f)) << "dv, " << at;
}

TEST(CudaAttentionBf16, MatchesCpuEmulation) {
  COHORT_REQUIRE_GPU();
  uint32_t seed = 500;
  for (int64_t t : {1, 17, 64, 130, 257})
    for (int64_t dh : {32, 64})
      for (Layout layout : {Layout::kContiguous, Layout::kFusedQkv})
        expect_bf16_matches_cpu({2, 3, t, dh}, layout, seed++);
}

TEST(CudaAttentionBf16, MatchesCpuEmulationOnLongSequences) {
  COHORT_REQUIRE_GPU();
  expect_bf16_matches_cpu({1, 3, 1024, 64}, Layout::kFusedQkv, 600);
  expect_bf16_matches_cpu({2, 2, 1000, 32}, Layout::kContiguous, 601);
}

// The bf16 path ran (it differs from the f32 kernels), and another head dim runs the f32
// kernels exactly.
TEST(CudaAttentionBf16, DiffersFromF32AndOtherHeadDimsAreF32) {
  COHORT_REQUIRE_GPU();
  const Qkv x({2, 3, 130, 64}, Layout::kContiguous, 700);
  const auto g = random_floats(x.numel(), 701, -1.f, 1.f);
  const Result bf = run_gpu_bf16(x, g), f32 = run_gpu(x, g);
  EXPECT_NE(bf.out, f32.out);
  EXPECT_NE(bf.dq, f32.dq);
  EXPECT_TRUE(close_to_scale(bf.out, f32.out, 5e-2f)) << "bf16 is still attention";
  const Qkv y({2, 3, 130, 16}, Layout::kFusedQkv, 702);
  const auto gy = random_floats(y.numel(), 703, -1.f, 1.f);
  const Result a = run_gpu_bf16(y, gy), b = run_gpu(y, gy);
  EXPECT_TRUE(a.out == b.out && a.lse == b.lse && a.dq == b.dq && a.dk == b.dk && a.dv == b.dv);
}

TEST(CudaAttentionBf16, RepeatedRunsAreBitIdentical) {
  COHORT_REQUIRE_GPU();
  const Qkv x({2, 3, 257, 64}, Layout::kFusedQkv, 800);
  const auto g = random_floats(x.numel(), 801);
  const Result first = run_gpu_bf16(x, g);
  for (int run = 0; run < 2; ++run) {
    const Result again = run_gpu_bf16(x, g);
    EXPECT_TRUE(again.out == first.out && again.lse == first.lse && again.dq == first.dq &&
                again.dk == first.dk && again.dv == first.dv)
        << "run " << run;
  }
}

// GPT-2 small's attention (B 8, H 12, T 1024, Dh 64; q, k, v contiguous slices as the model
// passes them): forward and backward times of the f32 and bf16 kernels, cudaEvent-timed over
// 10 runs after a warm-up, printed as "[ attention ]" (scripts/gpu-check.sh collects it).
TEST(CudaAttentionBf16, TimesGpt2SmallAgainstF32) {
  COHORT_REQUIRE_GPU();
  const AttnShape s{8, 12, 1024, 64};
  const size_t n = size_t(s.b * s.h * s.t * s.dh), rows = size_t(s.b * s.h * s.t);
  DeviceArray<float> qkv(random_floats(3 * n, 900)), g(random_floats(n, 901, -1.f, 1.f)), out(n),
      lse(rows), dq(n), dk(n), dv(n);
  const AttnStrides st{s.h * s.t * s.dh, s.t * s.dh, s.dh};
  const AttnInputs in{qkv.data(), qkv.data() + n, qkv.data() + 2 * n, st, st, st};
  cudaEvent_t e0, e1, e2;
  COHORT_CUDA_CHECK(cudaEventCreate(&e0));
  COHORT_CUDA_CHECK(cudaEventCreate(&e1));
  COHORT_CUDA_CHECK(cudaEventCreate(&e2));
  constexpr int kRuns = 10;
  auto time = [&](bool bf16, float* fwd_ms, float* bwd_ms) {
    auto fwd = [&] {
      if (bf16)
        causal_attention_forward_bf16(s, in, out.data(), lse.data(), nullptr);
      else
        causal_attention_forward(s, in, out.data(), lse.data(), nullptr);
    };
    auto bwd = [&] {
      if (bf16)
        causal_attention_backward_bf16(s, in, out.data(), g.data(), lse.data(), dq.data(),
                                       dk.data(), dv.data(), nullptr);
      else
        causal_attention_backward(s, in, g.data(), lse.data(), dq.data(), dk.data(), dv.data(),
                                  nullptr);
    };
    fwd();
    bwd();  // warm-up (and the shared-memory attributes)
    COHORT_CUDA_CHECK(cudaEventRecord(e0, nullptr));
    for (int i = 0; i < kRuns; ++i) fwd();
    COHORT_CUDA_CHECK(cudaEventRecord(e1, nullptr));
    for (int i = 0; i < kRuns; ++i) bwd();
    COHORT_CUDA_CHECK(cudaEventRecord(e2, nullptr));
    COHORT_CUDA_CHECK(cudaEventSynchronize(e2));
    COHORT_CUDA_CHECK(cudaEventElapsedTime(fwd_ms, e0, e1));
    COHORT_CUDA_CHECK(cudaEventElapsedTime(bwd_ms, e1, e2));
    *fwd_ms /= kRuns;
    *bwd_ms /= kRuns;
  };
  float f32_f = 0, f32_b = 0, bf_f = 0, bf_b = 0;
  time(false, &f32_f, &f32_b);
  time(true, &bf_f, &bf_b);
  for (cudaEvent_t e : {e0, e1, e2}) COHORT_CUDA_CHECK(cudaEventDestroy(e));
  std::cout << std::fixed << std::setprecision(3)
            << "[ attention ] B 8, H 12, T 1024, Dh 64, ms per call: f32 forward " << f32_f
            << ", backward " << f32_b << "; bf16 forward " << bf_f << ", backward " << bf_b
            << "; forward + backward " << (f32_f + f32_b) / (bf_f + bf_b) << "x faster in bf16"
            << std::endl;
  EXPECT_LT(bf_f + bf_b, f32_f + f32_b) << "tensor cores should beat the f32 kernels";
}

}  // namespace
}  // namespace cohort::cuda
