// kernels/cuda/embedding against kernels/cpu/embedding: the forward is a copy and the backward
// adds each vocabulary row's gradients in index order, as the CPU does, so both must match the
// CPU bit for bit. Indices repeat heavily (the case a racy scatter-add gets wrong).
#include "cohort/kernels/cuda/embedding.h"

#include "cohort/kernels/cpu/embedding.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::cuda {
namespace {

using testing::all_close;
using testing::random_floats;

struct Shape {
  int64_t v, d, n;
};
// A GPT-2 vocabulary with narrow rows, wide rows, a tiny vocabulary (every index repeats many
// times, rows of one column), and no indices at all.
constexpr Shape kShapes[] = {{50257, 31, 1000}, {1000, 768, 4099}, {7, 1, 37}, {37, 1000, 0}};

// idx [n]: half drawn from the first 16 rows (many repeats), half from the whole vocabulary.
std::vector<int64_t> random_indices(int64_t n, int64_t v, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> all(0, v - 1), few(0, std::min<int64_t>(v, 16) - 1);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i % 2 ? all(rng) : few(rng);
  return idx;
}

std::string name(Shape s) {
  return "V " + std::to_string(s.v) + ", D " + std::to_string(s.d) + ", n " + std::to_string(s.n);
}

TEST(CudaEmbedding, ForwardIsTheCpusCopy) {
  COHORT_REQUIRE_GPU();
  for (Shape s : kShapes) {
    const auto w = random_floats(size_t(s.v * s.d), 100 + uint32_t(s.d));
    const auto idx = random_indices(s.n, s.v, 101 + uint32_t(s.d));
    DeviceArray<float> dw(w), dout(size_t(s.n * s.d));
    DeviceArray<int64_t> didx(idx);
    std::vector<float> want(size_t(s.n * s.d));
    embedding_forward(dw.data(), s.v, s.d, didx.data(), s.n, dout.data(), nullptr);
    cpu::embedding_forward(w.data(), s.d, idx.data(), s.n, want.data());
    EXPECT_TRUE(all_close(dout.download(), want, 0, 0)) << name(s);
  }
}

TEST(CudaEmbedding, BackwardIsBitIdenticalToCpu) {
  COHORT_REQUIRE_GPU();
  for (Shape s : kShapes) {
    const auto g = random_floats(size_t(s.n * s.d), 110 + uint32_t(s.d));
    const auto idx = random_indices(s.n, s.v, 111 + uint32_t(s.d));
    // Garbage in dweight: rows no index names must come back zero.
    DeviceArray<float> dg(g), ddw(std::vector<float>(size_t(s.v * s.d), 9.f));
    DeviceArray<int64_t> didx(idx);
    std::vector<float> want(size_t(s.v * s.d));
    embedding_backward(dg.data(), didx.data(), s.n, s.v, s.d, ddw.data(), nullptr);
    cpu::embedding_backward(g.data(), idx.data(), s.n, s.v, s.d, want.data());
    // Exact: each element is the same float additions in the same order (embedding.h).
    EXPECT_TRUE(all_close(ddw.download(), want, 0, 0)) << name(s);
    for (int run = 0; run < 2; ++run) {
      embedding_backward(dg.data(), didx.data(), s.n, s.v, s.d, ddw.data(), nullptr);
      EXPECT_TRUE(ddw.download() == want) << name(s) << ", run " << run;
    }
  }
}

// Out-of-range indices are never dereferenced: forward writes a zero row, backward skips the
// position (the CPU without those positions), and first_out_of_range names the first.
TEST(CudaEmbedding, OutOfRangeIndicesAreSkippedAndReported) {
  COHORT_REQUIRE_GPU();
  const int64_t v = 50, d = 33, n = 9;
  const std::vector<int64_t> idx = {3, 49, 50, 3, -1, 0, int64_t{1} << 40, 3, -(int64_t{1} << 62)};
  const auto w = random_floats(size_t(v * d), 120), g = random_floats(size_t(n * d), 121);
  DeviceArray<float> dw(w), dg(g), dout(size_t(n * d)), ddw(size_t(v * d));
  DeviceArray<int64_t> didx(idx), dfirst(1);
  embedding_forward(dw.data(), v, d, didx.data(), n, dout.data(), nullptr);
  const auto out = dout.download();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      const bool ok = idx[size_t(i)] >= 0 && idx[size_t(i)] < v;
      ASSERT_EQ(out[size_t(i * d + j)], ok ? w[size_t(idx[size_t(i)] * d + j)] : 0.f)
          << "position " << i << ", column " << j;
    }
  std::vector<int64_t> kept_idx;
  std::vector<float> kept_g;
  for (int64_t i = 0; i < n; ++i) {
    if (idx[size_t(i)] < 0 || idx[size_t(i)] >= v) continue;
    kept_idx.push_back(idx[size_t(i)]);
    kept_g.insert(kept_g.end(), g.begin() + i * d, g.begin() + (i + 1) * d);
  }
  std::vector<float> want(size_t(v * d));
  cpu::embedding_backward(kept_g.data(), kept_idx.data(), int64_t(kept_idx.size()), v, d,
                          want.data());
  embedding_backward(dg.data(), didx.data(), n, v, d, ddw.data(), nullptr);
  EXPECT_TRUE(all_close(ddw.download(), want, 0, 0));
  first_out_of_range(didx.data(), n, v, dfirst.data(), nullptr);
  EXPECT_EQ(dfirst.download()[0], 2);
}

TEST(CudaEmbedding, FirstOutOfRangeIsNWhenAllAreInRange) {
  COHORT_REQUIRE_GPU();
  const int64_t n = 100003, v = 50257;
  auto idx = random_indices(n, v, 130);
  DeviceArray<int64_t> didx(idx), dfirst(1);
  first_out_of_range(didx.data(), n, v, dfirst.data(), nullptr);
  EXPECT_EQ(dfirst.download()[0], n);
  // Several bad positions, far apart: the smallest wins whatever order the threads ran in.
  idx[size_t(n - 1)] = v, idx[77777] = -5, idx[4242] = v + 1;
  didx.upload(idx);
  first_out_of_range(didx.data(), n, v, dfirst.data(), nullptr);
  EXPECT_EQ(dfirst.download()[0], 4242);
  first_out_of_range(didx.data(), 0, v, dfirst.data(), nullptr);
  EXPECT_EQ(dfirst.download()[0], 0);
}

}  // namespace
}  // namespace cohort::cuda
