// kernels/cuda/conv against kernels/cpu/conv on random inputs: odd sizes, kernels 3 and 5,
// strides 1 and 2, paddings 0 to 2, with and without bias, every subset of the gradients, the
// Fashion-MNIST CNN's layers, and shapes that take several gemm groups (and a group of one).
//
// Convolution tolerance: |GPU - CPU| <= 1e-4 |CPU| + 2e-5 * scale, where scale is the same
// convolution of |x|, |w|, |dy| (sum of the absolute terms: an element that cancels to near
// zero has no relative accuracy to speak of); f32 with TF32 off. Pooling is exact.
#include "cohort/kernels/cuda/conv.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "cohort/kernels/cpu/conv.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::cuda {
namespace {

using testing::random_floats;

constexpr float kRtol = 1e-4f, kScaleTol = 2e-5f;

std::string describe(const Conv2dShape& s) {
  return "N " + std::to_string(s.n) + ", C " + std::to_string(s.c) + ", " + std::to_string(s.h) +
         "x" + std::to_string(s.w) + ", O " + std::to_string(s.o) + ", kernel " +
         std::to_string(s.kh) + "x" + std::to_string(s.kw) + ", stride " +
         std::to_string(s.stride) + ", pad " + std::to_string(s.pad);
}

::testing::AssertionResult close_scaled(const std::vector<float>& got,
                                        const std::vector<float>& want,
                                        const std::vector<float>& scale) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const float tol = kRtol * std::fabs(want[i]) + kScaleTol * scale[i];
    if (!(std::fabs(got[i] - want[i]) <= tol) && bad++ == 0) first = i;  // NaN fails
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << want.size() << " elements out of tolerance; first at " << first
         << ": GPU " << got[first] << ", CPU " << want[first] << ", scale " << scale[first];
}

struct ConvData {
  std::vector<float> x, w, b, dy;  // b empty: no bias
};

ConvData make_data(const Conv2dShape& s, bool bias, uint32_t seed) {
  return {random_floats(s.n * s.c * s.h * s.w, seed), random_floats(s.o * s.patch(), seed + 1),
          bias ? random_floats(s.o, seed + 2) : std::vector<float>{},
          random_floats(s.n * s.o * s.oh() * s.ow(), seed + 3)};
}

ConvData abs_of(ConvData d) {
  for (auto* v : {&d.x, &d.w, &d.b, &d.dy})
    for (float& f : *v) f = std::fabs(f);
  return d;
}

struct ConvResult {
  std::vector<float> y, dx, dw, db;
};

ConvResult cpu_conv(const Conv2dShape& s, const ConvData& d) {
  ConvResult r{std::vector<float>(s.n * s.o * s.oh() * s.ow()), std::vector<float>(d.x.size()),
               std::vector<float>(d.w.size()), std::vector<float>(s.o)};
  std::vector<float> ws(
      std::max(cpu::conv2d_forward_workspace(s), cpu::conv2d_backward_workspace(s)) + 1);
  cpu::conv2d_forward(s, d.x.data(), d.w.data(), d.b.empty() ? nullptr : d.b.data(), r.y.data(),
                      ws.data());
  cpu::conv2d_backward(s, d.x.data(), d.w.data(), d.dy.data(),
                       {r.dx.data(), r.dw.data(), r.db.data()}, ws.data());
  return r;
}

// The CPU's results and their error scales (the same convolution of absolute values).
struct Reference {
  ConvResult want, scale;
};
Reference reference(const Conv2dShape& s, const ConvData& d) {
  return {cpu_conv(s, d), cpu_conv(s, abs_of(d))};
}

std::vector<float> nans(size_t n) {
  return std::vector<float>(n, NAN);  // outputs start as NaN: an element never written fails
}

// Device scratch of exactly the size conv.h reports, followed by a guard that must survive.
class Workspace {
 public:
  static constexpr int64_t kGuard = 1024;
  explicit Workspace(int64_t floats)
      : size_(floats), buf_(std::vector<float>(size_t(floats + kGuard), -7.25f)) {}
  float* data() { return buf_.data(); }
  bool guard_intact() const {
    const auto v = buf_.download();
    for (int64_t i = size_; i < size_ + kGuard; ++i)
      if (v[i] != -7.25f) return false;
    return true;
  }

 private:
  int64_t size_;
  DeviceArray<float> buf_;
};

// One stream, its cuBLASLt handle (TF32 off) and the device copies of a case's inputs.
struct GpuConv {
  Stream stream;
  MatmulHandle h{stream.get()};
  Conv2dShape s;
  DeviceArray<float> x, w, b, dy;
  Workspace ws;
  GpuConv(const Conv2dShape& shape, const ConvData& d)
      : s(shape),
        x(d.x),
        w(d.w),
        b(d.b),
        dy(d.dy),
        ws(std::max(cuda::conv2d_forward_workspace(shape),
                    cuda::conv2d_backward_workspace(shape))) {
    // The uploads ran on the legacy stream, which a non-blocking stream does not wait for.
    COHORT_CUDA_CHECK(cudaDeviceSynchronize());
  }
  const float* bias() const { return b.size() ? b.data() : nullptr; }

  std::vector<float> forward() {
    DeviceArray<float> y(nans(s.n * s.o * s.oh() * s.ow()));
    COHORT_CUDA_CHECK(cudaDeviceSynchronize());
    conv2d_forward(h, s, x.data(), w.data(), bias(), y.data(), ws.data(), stream.get());
    stream.synchronize();
    return y.download();
  }

  // The requested gradients (want_*); the others are passed as null.
  ConvResult backward(bool want_dx, bool want_dw, bool want_db) {
    DeviceArray<float> dx(nans(x.size())), dw(nans(w.size())), db(nans(s.o));
    COHORT_CUDA_CHECK(cudaDeviceSynchronize());
    conv2d_backward(h, s, x.data(), w.data(), dy.data(),
                    {want_dx ? dx.data() : nullptr, want_dw ? dw.data() : nullptr,
                     want_db ? db.data() : nullptr},
                    ws.data(), stream.get());
    stream.synchronize();
    return {{}, dx.download(), dw.download(), db.download()};
  }
};

// Forward and every gradient of one case against the CPU.
void check_conv(const Conv2dShape& s, bool bias, uint32_t seed) {
  const ConvData d = make_data(s, bias, seed);
  const Reference ref = reference(s, d);
  GpuConv gpu(s, d);
  const std::string what = describe(s) + (bias ? ", bias" : ", no bias");
  EXPECT_TRUE(close_scaled(gpu.forward(), ref.want.y, ref.scale.y)) << what << ": y";
  const ConvResult g = gpu.backward(true, true, true);
  EXPECT_TRUE(close_scaled(g.dx, ref.want.dx, ref.scale.dx)) << what << ": dx";
  EXPECT_TRUE(close_scaled(g.dw, ref.want.dw, ref.scale.dw)) << what << ": dw";
  EXPECT_TRUE(close_scaled(g.db, ref.want.db, ref.scale.db)) << what << ": db";
  EXPECT_TRUE(gpu.ws.guard_intact()) << what << ": wrote past the workspace";
}

TEST(CudaConv, ForwardAndBackwardMatchCpuOnOddShapes) {
  COHORT_REQUIRE_GPU();
  uint32_t seed = 1;
  for (int64_t k : {3, 5})
    for (int64_t stride : {1, 2})
      for (int64_t pad : {0, 1, 2})
        for (bool bias : {true, false}) {
          const Conv2dShape s{.n = 3,
                              .c = 5,
                              .h = 13,
                              .w = 13,
                              .o = 7,
                              .kh = k,
                              .kw = k,
                              .stride = stride,
                              .pad = pad};
          check_conv(s, bias, seed += 10);
        }
  // Rectangular input and kernel, a 1x1 kernel, a stride past the kernel (unread pixels).
  check_conv({.n = 2, .c = 3, .h = 9, .w = 14, .o = 4, .kh = 3, .kw = 5, .stride = 2, .pad = 1},
             true, 500);
  check_conv({.n = 3, .c = 6, .h = 7, .w = 5, .o = 5, .kh = 1, .kw = 1, .stride = 1, .pad = 0},
             true, 510);
  check_conv({.n = 2, .c = 2, .h = 11, .w = 12, .o = 3, .kh = 2, .kw = 2, .stride = 3, .pad = 1},
             false, 520);
}

TEST(CudaConv, NullGradientsAreSkipped) {
  COHORT_REQUIRE_GPU();
  const Conv2dShape s{
      .n = 3, .c = 5, .h = 13, .w = 13, .o = 7, .kh = 3, .kw = 3, .stride = 2, .pad = 1};
  const ConvData d = make_data(s, true, 7);
  const Reference ref = reference(s, d);
  GpuConv gpu(s, d);
  for (int mask = 0; mask < 8; ++mask) {
    const bool want_dx = mask & 1, want_dw = mask & 2, want_db = mask & 4;
    const ConvResult g = gpu.backward(want_dx, want_dw, want_db);
    const std::string what = "mask " + std::to_string(mask);
    if (want_dx) {
      EXPECT_TRUE(close_scaled(g.dx, ref.want.dx, ref.scale.dx)) << what;
    }
    if (want_dw) {
      EXPECT_TRUE(close_scaled(g.dw, ref.want.dw, ref.scale.dw)) << what;
    }
    if (want_db) {
      EXPECT_TRUE(close_scaled(g.db, ref.want.db, ref.scale.db)) << what;
    }
    // A skipped gradient is not written: its buffer still holds the NaNs it started with.
    if (!want_dx) {
      EXPECT_TRUE(std::isnan(g.dx[0]) && std::isnan(g.dx.back())) << what;
    }
    if (!want_dw) {
      EXPECT_TRUE(std::isnan(g.dw[0]) && std::isnan(g.dw.back())) << what;
    }
    if (!want_db) {
      EXPECT_TRUE(std::isnan(g.db[0]) && std::isnan(g.db.back())) << what;
    }
  }
  EXPECT_TRUE(gpu.ws.guard_intact());
}

TEST(CudaConv, FashionMnistCnnLayersMatchCpu) {
  COHORT_REQUIRE_GPU();
  check_conv({.n = 64, .c = 1, .h = 28, .w = 28, .o = 32, .kh = 3, .kw = 3, .stride = 1, .pad = 1},
             true, 600);
  check_conv({.n = 64, .c = 32, .h = 14, .w = 14, .o = 64, .kh = 3, .kw = 3, .stride = 1, .pad = 1},
             true, 610);
}

// Shapes too large for one gemm: several groups, the last one a single sample (the dw gemms
// add into the first group's result), and groups of one sample each (y written in place).
TEST(CudaConv, SeveralGroupsAndGroupsOfOneMatchCpu) {
  COHORT_REQUIRE_GPU();
  // n large at first: the group is the budget's, not clamped to the batch.
  Conv2dShape s{
      .n = 1 << 20, .c = 32, .h = 48, .w = 48, .o = 16, .kh = 3, .kw = 3, .stride = 1, .pad = 1};
  const int64_t group = conv2d_group(s);
  ASSERT_GT(group, 1) << "the 32 MiB group budget changed: pick another shape";
  s.n = group + 1;
  ASSERT_EQ(conv2d_group(s), group);
  check_conv(s, true, 700);
  const Conv2dShape big{
      .n = 2, .c = 64, .h = 96, .w = 96, .o = 8, .kh = 3, .kw = 3, .stride = 1, .pad = 1};
  ASSERT_EQ(conv2d_group(big), 1) << "the 32 MiB group budget changed: pick another shape";
  check_conv(big, true, 710);
  check_conv(big, false, 720);
}

TEST(CudaConv, SameBitsOnEveryRun) {
  COHORT_REQUIRE_GPU();
  Conv2dShape s{
      .n = 1 << 20, .c = 32, .h = 48, .w = 48, .o = 16, .kh = 3, .kw = 3, .stride = 1, .pad = 1};
  s.n = conv2d_group(s) + 1;  // several groups, the last one a single sample
  const ConvData d = make_data(s, true, 800);
  GpuConv gpu(s, d);
  const std::vector<float> y = gpu.forward();
  const ConvResult g = gpu.backward(true, true, true);
  for (int run = 0; run < 3; ++run) {
    EXPECT_EQ(gpu.forward(), y) << "run " << run;
    const ConvResult again = gpu.backward(true, true, true);
    EXPECT_EQ(again.dx, g.dx) << "run " << run;
    EXPECT_EQ(again.dw, g.dw) << "run " << run;
    EXPECT_EQ(again.db, g.db) << "run " << run;
  }
}

TEST(CudaConv, EmptyBatchHasZeroGradients) {
  COHORT_REQUIRE_GPU();
  const Conv2dShape s{
      .n = 0, .c = 3, .h = 8, .w = 8, .o = 4, .kh = 3, .kw = 3, .stride = 1, .pad = 1};
  EXPECT_EQ(cuda::conv2d_backward_workspace(s), 0);
  GpuConv gpu(s, make_data(s, true, 900));
  const ConvResult g = gpu.backward(true, true, true);
  EXPECT_EQ(g.dw, std::vector<float>(s.o * s.patch(), 0.f));
  EXPECT_EQ(g.db, std::vector<float>(s.o, 0.f));
}

// ---- max pooling: exact, ties and NaNs included --------------------------------------------

// Inputs from a few values, so windows hold ties (the first maximum must win); some NaNs.
std::vector<float> tied_inputs(size_t n, uint32_t seed) {
  std::vector<float> x = random_floats(n, seed, -3.f, 3.f);
  for (size_t i = 0; i < n; ++i) x[i] = std::round(x[i]);
  for (size_t i = 5; i < n; i += 101) x[i] = NAN;
  return x;
}

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

void check_pool(const Pool2dShape& s, uint32_t seed) {
  const int64_t in = s.n * s.c * s.h * s.w, out = s.n * s.c * s.oh() * s.ow();
  const auto x = tied_inputs(in, seed), dy = random_floats(out, seed + 1);
  std::vector<float> y(out), dx(in);
  std::vector<int32_t> argmax(out);
  cpu::max_pool2d_forward(s, x.data(), y.data(), argmax.data());
  cpu::max_pool2d_backward(s, dy.data(), argmax.data(), dx.data());

  DeviceArray<float> gx(x), gy(nans(out)), gdy(dy), gdx(nans(in));
  DeviceArray<int32_t> garg(std::vector<int32_t>(out, -1));
  max_pool2d_forward(s, gx.data(), gy.data(), garg.data(), nullptr);
  max_pool2d_backward(s, gdy.data(), garg.data(), gdx.data(), nullptr);
  const std::string what = "kernel " + std::to_string(s.kernel) + ", stride " +
                           std::to_string(s.stride) + ", " + std::to_string(s.h) + "x" +
                           std::to_string(s.w);
  EXPECT_TRUE(same_floats(gy.download(), y)) << what << ": y";
  EXPECT_EQ(garg.download(), argmax) << what << ": argmax";
  EXPECT_EQ(gdx.download(), dx) << what << ": dx";  // same additions in the same order
}

TEST(CudaMaxPool, ForwardAndBackwardMatchCpuExactly) {
  COHORT_REQUIRE_GPU();
  uint32_t seed = 1;
  for (auto [kernel, stride] :
       {std::pair<int64_t, int64_t>{2, 2}, {3, 2}, {3, 1}, {2, 1}, {2, 3}, {1, 1}, {5, 2}})
    check_pool({.n = 3, .c = 5, .h = 13, .w = 13, .kernel = kernel, .stride = stride}, seed += 10);
  check_pool({.n = 2, .c = 3, .h = 9, .w = 14, .kernel = 3, .stride = 2}, 100);
  // Fashion-MNIST's CNN: 28x28 and 14x14 maps pooled 2x2.
  check_pool({.n = 64, .c = 32, .h = 28, .w = 28, .kernel = 2, .stride = 2}, 200);
  check_pool({.n = 64, .c = 64, .h = 14, .w = 14, .kernel = 2, .stride = 2}, 300);
}

}  // namespace
}  // namespace cohort::cuda
