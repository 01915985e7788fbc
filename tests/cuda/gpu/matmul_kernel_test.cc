// kernels/cuda/matmul (cuBLASLt) against kernels/cpu's sgemm on odd sizes, every transposition,
// f32 / TF32 / bf16, and the fused bias and GELU epilogues.
//
// Tolerances are scaled by sum_k |a_ik b_kj| (a product's natural error scale: an element near
// zero from cancellation has no relative accuracy to speak of), plus a relative part for the
// output's own rounding where it is bf16.
#include "cohort/kernels/cuda/matmul.h"

#include <iostream>

#include "cohort/kernels/cpu/gemm.h"
#include "cohort/kernels/cuda/device_math.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::cuda {
namespace {

using testing::random_floats;

// A row-major operand op(x) [rows, cols] stored with `pad` extra columns.
struct HostMat {
  std::vector<float> v;
  int64_t ld;
  Trans trans;
};

HostMat make_operand(int64_t rows, int64_t cols, Trans t, int64_t pad, uint32_t seed,
                     float scale = 2.f) {
  const int64_t stored_rows = t == Trans::kNo ? rows : cols;
  const int64_t ld = (t == Trans::kNo ? cols : rows) + pad;
  return {random_floats(stored_rows * ld, seed, -scale, scale), ld, t};
}

cpu::MatRef cpu_ref(const HostMat& x) {
  return {x.v.data(), x.ld, x.trans == Trans::kNo ? cpu::Trans::kNo : cpu::Trans::kYes};
}

float at(const HostMat& x, int64_t i, int64_t j) {  // element (i, j) of op(x)
  return x.trans == Trans::kNo ? x.v[i * x.ld + j] : x.v[j * x.ld + i];
}

// sum_k |op(a)_ik op(b)_kj| for [m, n].
std::vector<float> abs_products(const HostMat& a, const HostMat& b, int64_t m, int64_t n,
                                int64_t k) {
  std::vector<float> s(m * n, 0.f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const float x = std::fabs(at(a, i, p));
      for (int64_t j = 0; j < n; ++j) s[i * n + j] += x * std::fabs(at(b, p, j));
    }
  return s;
}

// |got - want| <= rtol |want| + scale_tol * scale, element by element, naming the first miss.
::testing::AssertionResult close_scaled(const std::vector<float>& got,
                                        const std::vector<float>& want,
                                        const std::vector<float>& scale, float rtol,
                                        float scale_tol) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= rtol * std::fabs(want[i]) + scale_tol * scale[i]) &&
        bad++ == 0)
      first = i;
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << want.size() << " out of tolerance; "
                                       << "first at " << first << ": GPU " << got[first] << ", CPU "
                                       << want[first] << ", scale " << scale[first];
}

// The CPU's answer for [m, n] (ldc = n), and the error scale.
struct Reference {
  std::vector<float> c, scale;
};
Reference cpu_matmul(const HostMat& a, const HostMat& b, int64_t m, int64_t n, int64_t k) {
  Reference r{std::vector<float>(m * n), abs_products(a, b, m, n, k)};
  cpu::sgemm(m, n, k, 1.f, cpu_ref(a), cpu_ref(b), 0.f, r.c.data(), n);
  return r;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = math::bf16_from_f32(x[i]);
  return y;
}
std::vector<float> from_bf16(const std::vector<uint16_t>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = math::f32_from_bf16(x[i]);
  return y;
}
HostMat rounded_to_bf16(HostMat x) {
  x.v = from_bf16(to_bf16(x.v));
  return x;
}

constexpr int64_t kM = 37, kK = 1001, kN = 129;

// f32 in and out, no epilogue: c = op(a) op(b) on the device.
std::vector<float> gpu_f32(MatmulHandle& h, const HostMat& a, const HostMat& b, int64_t m,
                           int64_t n, int64_t k) {
  DeviceArray<float> da(a.v), db(b.v), dc(m * n);
  sgemm(h, m, n, k, 1.f, {da.data(), a.ld, a.trans}, {db.data(), b.ld, b.trans}, 0.f, dc.data(), n);
  return dc.download();
}

TEST(CudaMatmul, F32MatchesCpuSgemmInEveryTransposition) {
  COHORT_REQUIRE_GPU();
  Stream stream;
  MatmulHandle h(stream.get());
  for (Trans ta : {Trans::kNo, Trans::kYes})
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      const int64_t pad = ta == tb ? 0 : 3;  // odd row strides too
      const HostMat a = make_operand(kM, kK, ta, pad, 1), b = make_operand(kK, kN, tb, pad, 2);
      const Reference want = cpu_matmul(a, b, kM, kN, kK);
      EXPECT_TRUE(close_scaled(gpu_f32(h, a, b, kM, kN, kK), want.c, want.scale, 0, 2e-5f))
          << "trans a " << int(ta) << ", trans b " << int(tb);
    }
  // The transposed shape too: m and n swapped, so neither is a multiple of anything.
  const HostMat a = make_operand(kN, kK, Trans::kYes, 1, 3),
                b = make_operand(kK, kM, Trans::kNo, 0, 4);
  const Reference want = cpu_matmul(a, b, kN, kM, kK);
  EXPECT_TRUE(close_scaled(gpu_f32(h, a, b, kN, kM, kK), want.c, want.scale, 0, 2e-5f));
}

TEST(CudaMatmul, AlphaBetaAndRowStrideOfCLikeSgemm) {
  COHORT_REQUIRE_GPU();
  Stream stream;
  MatmulHandle h(stream.get());
  const HostMat a = make_operand(kM, kK, Trans::kNo, 0, 5),
                b = make_operand(kK, kN, Trans::kYes, 0, 6);
  const int64_t ldc = kN + 5;
  const auto c0 = random_floats(kM * ldc, 7);
  std::vector<float> want = c0;
  cpu::sgemm(kM, kN, kK, 0.5f, cpu_ref(a), cpu_ref(b), -1.5f, want.data(), ldc);
  DeviceArray<float> da(a.v), db(b.v), dc(c0);
  sgemm(h, kM, kN, kK, 0.5f, {da.data(), a.ld, a.trans}, {db.data(), b.ld, b.trans}, -1.5f,
        dc.data(), ldc);
  const auto got = dc.download();
  const auto prod = abs_products(a, b, kM, kN, kK);
  std::vector<float> scale(kM * ldc, 0.f);  // the padding columns must come back untouched
  for (int64_t i = 0; i < kM; ++i)
    for (int64_t j = 0; j < kN; ++j)
      scale[i * ldc + j] = prod[i * kN + j] + std::fabs(c0[i * ldc + j]);
  EXPECT_TRUE(close_scaled(got, want, scale, 0, 2e-5f));
}

TEST(CudaMatmul, Tf32WhenAllowedStaysWithinTf32Rounding) {
  COHORT_REQUIRE_GPU();
  Stream stream;
  MatmulHandle h(stream.get(), {.allow_tf32 = true});
  const HostMat a = make_operand(kM, kK, Trans::kNo, 0, 8),
                b = make_operand(kK, kN, Trans::kNo, 0, 9);
  const Reference want = cpu_matmul(a, b, kM, kN, kK);
  // 10-bit mantissas: each product within about 2^-10 of the f32 one.
  EXPECT_TRUE(close_scaled(gpu_f32(h, a, b, kM, kN, kK), want.c, want.scale, 0, 3e-3f));
}

// bf16 a and b (the CPU multiplies the same rounded values in f32), f32 accumulation, and an f32
// or bf16 c; optionally with the bias epilogue (bias in c's type).
void check_bf16(DType out, bool with_bias) {
  Stream stream;
  MatmulHandle h(stream.get());
  const HostMat a = rounded_to_bf16(make_operand(kM, kK, Trans::kYes, 1, 10));
  const HostMat b = rounded_to_bf16(make_operand(kK, kN, Trans::kNo, 0, 11));
  Reference want = cpu_matmul(a, b, kM, kN, kK);
  std::vector<float> bias = random_floats(kN, 12, -4.f, 4.f);
  if (out == DType::kBF16) bias = from_bf16(to_bf16(bias));
  if (with_bias)
    for (int64_t i = 0; i < kM * kN; ++i) want.c[i] += bias[i % kN];
  DeviceArray<uint16_t> da(to_bf16(a.v)), db(to_bf16(b.v)), dbias16(to_bf16(bias));
  DeviceArray<float> dbias32(bias), dc32(kM * kN);
  DeviceArray<uint16_t> dc16(kM * kN);
  MatmulArgs args{.m = kM,
                  .n = kN,
                  .k = kK,
                  .a = {da.data(), a.ld, a.trans},
                  .b = {db.data(), b.ld, b.trans},
                  .in = DType::kBF16};
  args.out = out;
  args.c = out == DType::kF32 ? static_cast<void*>(dc32.data()) : dc16.data();
  args.ldc = kN;
  args.epilogue = with_bias ? Epilogue::kBias : Epilogue::kNone;
  args.bias = out == DType::kF32 ? static_cast<const void*>(dbias32.data()) : dbias16.data();
  h.matmul(args);
  const auto got = out == DType::kF32 ? dc32.download() : from_bf16(dc16.download());
  // bf16 output: one rounding of the result, 2^-8 relative at most; with the bias epilogue two
  // (cuBLASLt rounds the product to bf16 before it adds the bf16 bias: seen on an H200).
  const float rtol = out == DType::kF32 ? 0.f : with_bias ? 8e-3f : 4e-3f;
  EXPECT_TRUE(close_scaled(got, want.c, want.scale, rtol, 2e-5f))
      << "output " << (out == DType::kF32 ? "f32" : "bf16") << (with_bias ? " + bias" : "");
}

TEST(CudaMatmul, Bf16InputsWithF32AndBf16Outputs) {
  COHORT_REQUIRE_GPU();
  check_bf16(DType::kF32, false);
  check_bf16(DType::kBF16, false);
}

TEST(CudaMatmul, BiasEpilogueAddsABiasPerOutputColumn) {
  COHORT_REQUIRE_GPU();
  check_bf16(DType::kF32, true);
  check_bf16(DType::kBF16, true);
  Stream stream;
  MatmulHandle h(stream.get());
  const HostMat a = make_operand(kM, kK, Trans::kNo, 2, 13),
                b = make_operand(kK, kN, Trans::kYes, 0, 14);
  Reference want = cpu_matmul(a, b, kM, kN, kK);
  const auto bias = random_floats(kN, 15, -4.f, 4.f);
  for (int64_t i = 0; i < kM * kN; ++i) want.c[i] += bias[i % kN];
  DeviceArray<float> da(a.v), db(b.v), dbias(bias), dc(kM * kN);
  h.matmul({.m = kM,
            .n = kN,
            .k = kK,
            .a = {da.data(), a.ld, a.trans},
            .b = {db.data(), b.ld, b.trans},
            .c = dc.data(),
            .ldc = kN,
            .epilogue = Epilogue::kBias,
            .bias = dbias.data()});
  EXPECT_TRUE(close_scaled(dc.download(), want.c, want.scale, 0, 2e-5f));
  std::cout << "[ matmul  ] epilogue fallbacks (cuBLASLt had no fused algorithm): "
            << h.epilogue_fallbacks() << "\n";
}

// Inputs scaled so the pre-activations are O(1), where GELU bends and the two GELUs differ.
TEST(CudaMatmul, GeluBiasEpilogueIsTheTanhApproximation) {
  COHORT_REQUIRE_GPU();
  Stream stream;
  MatmulHandle h(stream.get());
  const HostMat a = make_operand(kM, kK, Trans::kNo, 0, 16, 0.45f);
  const HostMat b = make_operand(kK, kN, Trans::kNo, 0, 17, 0.45f);
  const Reference pre = cpu_matmul(a, b, kM, kN, kK);
  const auto bias = random_floats(kN, 18, -1.f, 1.f);
  std::vector<float> want(kM * kN), exact(kM * kN), scale(kM * kN);
  for (int64_t i = 0; i < kM * kN; ++i) {
    const float x = pre.c[i] + bias[i % kN];
    want[i] = math::gelu_tanh(x), exact[i] = math::gelu(x);
    scale[i] = pre.scale[i] + 1.f;  // GELU's slope is below 1.13; +1 for tanh's own rounding
  }
  DeviceArray<float> da(a.v), db(b.v), dbias(bias), dc(kM * kN);
  h.matmul({.m = kM,
            .n = kN,
            .k = kK,
            .a = {da.data(), a.ld, a.trans},
            .b = {db.data(), b.ld, b.trans},
            .c = dc.data(),
            .ldc = kN,
            .epilogue = Epilogue::kGeluTanhBias,
            .bias = dbias.data()});
  const auto got = dc.download();
  EXPECT_TRUE(close_scaled(got, want, scale, 1e-4f, 5e-5f));
  double off_tanh = 0, off_exact = 0;  // over all elements: nearer the tanh GELU than the exact
  for (int64_t i = 0; i < kM * kN; ++i)
    off_tanh += std::fabs(got[i] - want[i]), off_exact += std::fabs(got[i] - exact[i]);
  EXPECT_LT(off_tanh, off_exact) << "cuBLASLt's GELU is not the tanh approximation?";
  std::cout << "[ matmul  ] GELU epilogue: mean |GPU - tanh GELU| " << off_tanh / (kM * kN)
            << ", mean |GPU - exact GELU| " << off_exact / (kM * kN) << ", fallbacks "
            << h.epilogue_fallbacks() << "\n";
}

TEST(CudaMatmul, KZeroGivesBetaCPlusTheEpilogue) {
  COHORT_REQUIRE_GPU();
  Stream stream;
  MatmulHandle h(stream.get());
  const auto c0 = random_floats(kM * kN, 19), bias = random_floats(kN, 20);
  DeviceArray<float> dc(c0), dbias(bias);
  h.matmul({.m = kM,
            .n = kN,
            .k = 0,
            .c = dc.data(),
            .ldc = kN,
            .beta = 2.f,
            .epilogue = Epilogue::kBias,
            .bias = dbias.data()});
  std::vector<float> want(kM * kN);
  for (int64_t i = 0; i < kM * kN; ++i) want[i] = 2.f * c0[i] + bias[i % kN];
  EXPECT_TRUE(testing::all_close(dc.download(), want, 1e-6f, 0));
}

TEST(CudaMatmul, RepeatedCallsAllocateNothing) {
  COHORT_REQUIRE_GPU();
  Stream stream;
  MatmulHandle h(stream.get());
  const HostMat a = make_operand(kM, kK, Trans::kNo, 0, 21),
                b = make_operand(kK, kN, Trans::kNo, 0, 22);
  DeviceArray<float> da(a.v), db(b.v), dc(kM * kN);
  auto call = [&] {
    sgemm(h, kM, kN, kK, 1.f, {da.data(), a.ld, a.trans}, {db.data(), b.ld, b.trans}, 0.f,
          dc.data(), kN);
  };
  call();  // cuBLASLt may set itself up on the first call
  stream.synchronize();
  size_t free_before = 0, free_after = 0, total = 0;
  COHORT_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  for (int i = 0; i < 50; ++i) call();
  stream.synchronize();
  COHORT_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
  EXPECT_EQ(free_before, free_after);
}

TEST(CudaMatmul, BadStridesAreInvalidArguments) {
  COHORT_REQUIRE_GPU();
  Stream stream;
  MatmulHandle h(stream.get());
  DeviceArray<float> d(kM * kK);
  EXPECT_THROW(sgemm(h, kM, kN, kK, 1.f, {d.data(), kK - 1}, {d.data(), kN}, 0.f, d.data(), kN),
               InvalidArgument);
  EXPECT_THROW(sgemm(h, kM, kN, kK, 1.f, {d.data(), kK}, {d.data(), kN}, 0.f, d.data(), kN - 1),
               InvalidArgument);
  EXPECT_THROW(h.matmul({.m = kM,
                         .n = kN,
                         .k = kK,
                         .a = {d.data(), kK},
                         .b = {d.data(), kN},
                         .c = d.data(),
                         .ldc = kN,
                         .epilogue = Epilogue::kBias}),
               InvalidArgument);  // a bias epilogue without a bias
}

// No GPU needed: cuBLAS's status names come from the library alone.
TEST(CudaMatmul, CublasFailuresAreCudaErrorsNamingCallAndStatus) {
  try {
    COHORT_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);
    FAIL() << "no throw";
  } catch (const CudaError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos) << what;
    EXPECT_NE(what.find("matmul_kernel_test.cc"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(COHORT_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
}

}  // namespace
}  // namespace cohort::cuda
