// kernels/cuda/layer_norm against kernels/cpu/norm on random rows of odd widths, with and
// without weight and bias, and the null-pointer skips of LayerNormGrads.
#include "cohort/kernels/cuda/layer_norm.h"

#include "cohort/kernels/cpu/norm.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::cuda {
namespace {

using testing::all_close;
using testing::random_floats;

struct Shape {
  int64_t rows, d;
};
// Rows of 1 (zero variance), under a warp, one block's worth and many; many rows for dw / db.
constexpr Shape kShapes[] = {{37, 1}, {37, 31}, {37, 1000}, {37, 4097}, {1000, 31}, {3, 50257}};
constexpr float kEps = 1e-5f;

// Inputs of one case: x with a mean far from 0 (where a sum of squares would cancel), weight
// and bias present or null.
struct Case {
  int64_t rows, d;
  std::vector<float> x, w, b, dy;
  Case(Shape s, uint32_t seed)
      : rows(s.rows),
        d(s.d),
        x(random_floats(size_t(s.rows * s.d), seed, 3.f, 7.f)),
        w(random_floats(size_t(s.d), seed + 1, 0.5f, 1.5f)),
        b(random_floats(size_t(s.d), seed + 2, -1.f, 1.f)),
        dy(random_floats(size_t(s.rows * s.d), seed + 3, -1.f, 1.f)) {}
};

// The device copies of a case, and its outputs.
struct DeviceCase {
  DeviceArray<float> x, w, b, dy, y, mean, rstd;
  explicit DeviceCase(const Case& c)
      : x(c.x),
        w(c.w),
        b(c.b),
        dy(c.dy),
        y(c.x.size()),
        mean(size_t(c.rows)),
        rstd(size_t(c.rows)) {}
};

TEST(CudaLayerNorm, ForwardMatchesCpuWithAndWithoutWeightAndBias) {
  COHORT_REQUIRE_GPU();
  for (Shape s : kShapes) {
    const Case c(s, 10 + uint32_t(s.d));
    DeviceCase g(c);
    std::vector<float> y(c.x.size()), mean(size_t(c.rows)), rstd(size_t(c.rows));
    for (int variant = 0; variant < 4; ++variant) {
      const bool has_w = variant & 1, has_b = variant & 2;
      layer_norm_forward(g.x.data(), has_w ? g.w.data() : nullptr, has_b ? g.b.data() : nullptr,
                         c.rows, c.d, kEps, g.y.data(), g.mean.data(), g.rstd.data(), nullptr);
      cpu::layer_norm_forward(c.x.data(), has_w ? c.w.data() : nullptr,
                              has_b ? c.b.data() : nullptr, c.rows, c.d, kEps, y.data(),
                              mean.data(), rstd.data());
      const std::string what = "d " + std::to_string(c.d) + ", rows " + std::to_string(c.rows) +
                               ", weight " + std::to_string(has_w) + ", bias " +
                               std::to_string(has_b);
      EXPECT_TRUE(all_close(g.mean.download(), mean, 1e-5f, 1e-5f)) << "mean, " << what;
      EXPECT_TRUE(all_close(g.rstd.download(), rstd, 1e-4f, 0)) << "rstd, " << what;
      EXPECT_TRUE(all_close(g.y.download(), y, 1e-4f, 1e-4f)) << "y, " << what;
    }
  }
}

TEST(CudaLayerNorm, BackwardMatchesCpu) {
  COHORT_REQUIRE_GPU();
  for (Shape s : kShapes) {
    const Case c(s, 20 + uint32_t(s.d));
    DeviceCase g(c);
    DeviceArray<float> ddx(c.x.size()), ddw(size_t(c.d)), ddb(size_t(c.d));
    std::vector<float> y(c.x.size()), mean(size_t(c.rows)), rstd(size_t(c.rows));
    std::vector<float> dx(c.x.size()), dw(size_t(c.d)), db(size_t(c.d));
    for (bool has_w : {true, false}) {
      const float* w = has_w ? c.w.data() : nullptr;
      // Both backwards from the CPU's statistics, so only the backward is compared.
      cpu::layer_norm_forward(c.x.data(), w, nullptr, c.rows, c.d, kEps, y.data(), mean.data(),
                              rstd.data());
      g.mean.upload(mean);
      g.rstd.upload(rstd);
      layer_norm_backward(g.dy.data(), g.x.data(), has_w ? g.w.data() : nullptr, g.mean.data(),
                          g.rstd.data(), c.rows, c.d, {ddx.data(), ddw.data(), ddb.data()},
                          nullptr);
      cpu::layer_norm_backward(c.dy.data(), c.x.data(), w, mean.data(), rstd.data(), c.rows, c.d,
                               {dx.data(), dw.data(), db.data()});
      const std::string what = "d " + std::to_string(c.d) + ", rows " + std::to_string(c.rows) +
                               ", weight " + std::to_string(has_w);
      EXPECT_TRUE(all_close(ddx.download(), dx, 1e-4f, 1e-4f)) << "dx, " << what;
      // Sums over up to 1000 rows: the CPU adds in float, the GPU in double.
      EXPECT_TRUE(all_close(ddw.download(), dw, 1e-4f, 5e-4f)) << "dw, " << what;
      EXPECT_TRUE(all_close(ddb.download(), db, 1e-4f, 5e-4f)) << "db, " << what;
    }
  }
}

// A null gradient pointer skips that gradient: its buffer keeps what it held.
TEST(CudaLayerNorm, NullGradientsAreSkipped) {
  COHORT_REQUIRE_GPU();
  const Case c({37, 1000}, 30);
  DeviceCase g(c);
  layer_norm_forward(g.x.data(), g.w.data(), g.b.data(), c.rows, c.d, kEps, g.y.data(),
                     g.mean.data(), g.rstd.data(), nullptr);
  const std::vector<float> sentinel_dx(c.x.size(), 7.f), sentinel_d(size_t(c.d), 7.f);
  DeviceArray<float> ddx(sentinel_dx), ddw(sentinel_d), ddb(sentinel_d);
  auto run = [&](LayerNormGrads grads) {
    layer_norm_backward(g.dy.data(), g.x.data(), g.w.data(), g.mean.data(), g.rstd.data(), c.rows,
                        c.d, grads, nullptr);
  };
  run({nullptr, ddw.data(), nullptr});
  EXPECT_TRUE(all_close(ddx.download(), sentinel_dx, 0, 0)) << "dx written";
  EXPECT_TRUE(all_close(ddb.download(), sentinel_d, 0, 0)) << "db written";
  EXPECT_FALSE(all_close(ddw.download(), sentinel_d, 0, 0)) << "dw not written";
  run({ddx.data(), nullptr, ddb.data()});
  EXPECT_FALSE(all_close(ddx.download(), sentinel_dx, 0, 0)) << "dx not written";
  EXPECT_FALSE(all_close(ddb.download(), sentinel_d, 0, 0)) << "db not written";
  run({nullptr, nullptr, nullptr});  // nothing to do: must not fail
}

// dw and db are column sums with a fixed shape: the same bits on every run.
TEST(CudaLayerNorm, BackwardIsBitIdenticalAcrossRuns) {
  COHORT_REQUIRE_GPU();
  const Case c({1000, 4097}, 40);
  DeviceCase g(c);
  layer_norm_forward(g.x.data(), g.w.data(), g.b.data(), c.rows, c.d, kEps, g.y.data(),
                     g.mean.data(), g.rstd.data(), nullptr);
  DeviceArray<float> ddx(c.x.size()), ddw(size_t(c.d)), ddb(size_t(c.d));
  std::vector<float> first_dx, first_dw, first_db;
  for (int run = 0; run < 3; ++run) {
    layer_norm_backward(g.dy.data(), g.x.data(), g.w.data(), g.mean.data(), g.rstd.data(), c.rows,
                        c.d, {ddx.data(), ddw.data(), ddb.data()}, nullptr);
    if (run == 0) {
      first_dx = ddx.download(), first_dw = ddw.download(), first_db = ddb.download();
      continue;
    }
    EXPECT_TRUE(ddx.download() == first_dx) << "run " << run;
    EXPECT_TRUE(ddw.download() == first_dw) << "run " << run;
    EXPECT_TRUE(ddb.download() == first_db) << "run " << run;
  }
}

}  // namespace
}  // namespace cohort::cuda
