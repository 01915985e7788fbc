#include <array>
#include <cmath>

#include "cohort/core/thread_pool.h"
#include "cohort/ops/ops.h"
#include "tests/support/gradcheck.h"

namespace cohort {
namespace {

using testing::gradcheck;

// Reference: sums of a [2, 3, 4] tensor over the dims in `mask`, in double.
std::vector<double> ref_sum_234(const std::vector<float>& v, std::array<bool, 3> mask) {
  const int64_t n0 = mask[0] ? 1 : 2, n1 = mask[1] ? 1 : 3, n2 = mask[2] ? 1 : 4;
  std::vector<double> out(size_t(n0 * n1 * n2), 0.0);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) {
        int64_t o = ((mask[0] ? 0 : i) * n1 + (mask[1] ? 0 : j)) * n2 + (mask[2] ? 0 : k);
        out[size_t(o)] += v[size_t((i * 3 + j) * 4 + k)];
      }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "at " << i;
}

TEST(Reduce, SumOverDimsMatchesReference) {
  Tensor x = randn({2, 3, 4}, 1);
  std::vector<float> v = x.to_vector<float>();
  expect_close(ops::sum(x).to_vector<float>(), ref_sum_234(v, {true, true, true}), 1e-6);
  EXPECT_EQ(ops::sum(x).shape(), Shape{});
  EXPECT_EQ(ops::sum(x, {}, true).shape(), (Shape{1, 1, 1}));
  expect_close(ops::sum(x, {1}).to_vector<float>(), ref_sum_234(v, {false, true, false}), 1e-6);
  EXPECT_EQ(ops::sum(x, {1}).shape(), (Shape{2, 4}));
  EXPECT_EQ(ops::sum(x, {-2}, true).shape(), (Shape{2, 1, 4}));
  // Non-adjacent dims (the permute-and-copy path) and the last dim.
  expect_close(ops::sum(x, {0, 2}).to_vector<float>(), ref_sum_234(v, {true, false, true}), 1e-6);
  EXPECT_EQ(ops::sum(x, {2, 0}, true).shape(), (Shape{1, 3, 1}));
  expect_close(ops::sum(x, {-1}).to_vector<float>(), ref_sum_234(v, {false, false, true}), 1e-6);
  expect_close(ops::sum(x, {0, 1}).to_vector<float>(), ref_sum_234(v, {true, true, false}), 1e-6);
}

TEST(Reduce, MeanAndStridedInput) {
  Tensor x = randn({4, 6}, 2);
  std::vector<float> m = ops::mean(x, {0}).to_vector<float>(), v = x.to_vector<float>();
  for (int j = 0; j < 6; ++j) {
    double s = 0;
    for (int i = 0; i < 4; ++i) s += v[size_t(i * 6 + j)];
    EXPECT_NEAR(m[size_t(j)], s / 4, 1e-6);
  }
  // A transposed input reduces like its contiguous copy.
  // (Rows and columns are summed in different orders, hence the tolerance.)
  std::vector<float> s0 = ops::sum(x, {0}).to_vector<float>();
  expect_close(ops::sum(x.t(), {1}).to_vector<float>(), std::vector<double>(s0.begin(), s0.end()),
               1e-6);
  std::vector<float> m1 = ops::mean(x, {1}).to_vector<float>();
  expect_close(ops::mean(x.t(), {0}).to_vector<float>(), std::vector<double>(m1.begin(), m1.end()),
               1e-6);
  // Reducing an empty dim: sum 0, mean NaN (as torch).
  EXPECT_EQ(ops::sum(zeros({0, 3}), {0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_TRUE(std::isnan(ops::mean(zeros({0})).item<float>()));
}

TEST(Reduce, LargeSumsAreAccurateAndIndependentOfThreadCount) {
  Tensor x = ops::add_scalar(randn({300001}, 3), 0.5);  // sum ~150000
  std::vector<float> v = x.to_vector<float>();
  double ref = 0;
  for (float f : v) ref += f;
  Tensor cols = randn({2000, 300}, 4);
  set_num_threads(1);
  float one = ops::sum(x).item<float>();
  std::vector<float> cols_one = ops::sum(cols, {0}).to_vector<float>();
  std::vector<float> rows_one = ops::sum(cols, {1}).to_vector<float>();
  set_num_threads(4);
  float many = ops::sum(x).item<float>();
  std::vector<float> cols_many = ops::sum(cols, {0}).to_vector<float>();
  std::vector<float> rows_many = ops::sum(cols, {1}).to_vector<float>();
  set_num_threads(0);
  EXPECT_NEAR(one, ref, 1e-6 * std::abs(ref));
  EXPECT_EQ(one, many);
  EXPECT_EQ(cols_one, cols_many);
  EXPECT_EQ(rows_one, rows_many);
}

TEST(Reduce, MaxAndArgmax) {
  Tensor x = from_vector({1, 5, 5, 2, -1, -3, -2, -3}, {2, 4});
  EXPECT_EQ(ops::max(x, 1).to_vector<float>(), (std::vector<float>{5, -1}));
  EXPECT_EQ(ops::max(x, 1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(ops::max(x, 0).to_vector<float>(), (std::vector<float>{1, 5, 5, 2}));
  Tensor am = ops::argmax(x, -1);
  EXPECT_EQ(am.dtype(), DType::i64);
  EXPECT_EQ(am.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));  // first of the tied 5s
  EXPECT_EQ(ops::argmax(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0}));
  // Long rows take the vectorised path; the maximum sits past the first 8 lanes.
  Tensor r = randn({3, 1000}, 5);
  r.data<float>()[1000 + 777] = 50;
  EXPECT_EQ(ops::argmax(r, 1).to_vector<int64_t>()[1], 777);
  // A NaN is the maximum, as in torch.
  Tensor n = from_vector({1, NAN, 3}, {1, 3});
  EXPECT_TRUE(std::isnan(ops::max(n, 1).item<float>()));
  EXPECT_EQ(ops::argmax(n, 1).item<int64_t>(), 1);
}

TEST(Reduce, MaxGradientGoesToTheFirstMaximum) {
  Tensor x = from_vector({1, 3, 3, 2}, {4}).set_requires_grad(true);
  ops::max(x, 0).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0, 1, 0, 0}));
}

TEST(Reduce, Gradients) {
  auto f = [](std::vector<int64_t> dims, bool keep) {
    return [=](const std::vector<Tensor>& in) { return ops::sum(in[0], dims, keep); };
  };
  EXPECT_TRUE(gradcheck(f({}, false), {randn({2, 3, 4}, 1)}));
  EXPECT_TRUE(gradcheck(f({1}, false), {randn({2, 3, 4}, 2)}));
  EXPECT_TRUE(gradcheck(f({0, 2}, true), {randn({2, 3, 4}, 3)}));
  EXPECT_TRUE(gradcheck(f({-1}, true), {randn({2, 3, 4}, 4)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::mean(in[0], {0, 2}); }, {randn({2, 3, 4}, 5)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::mean(in[0]); }, {randn({3, 4}, 6)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::mean(in[0].t(), {1}); }, {randn({3, 4}, 7)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::max(in[0], 1); }, {randn({3, 5}, 8)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::max(in[0], 0, true); }, {randn({4, 3}, 9)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::max(in[0].t(), 1); }, {randn({4, 3}, 10)}));
  EXPECT_TRUE(gradcheck(
      [](auto& in) {
        return ops::sum_to(in[0], {3, 1});
      },
      {randn({2, 3, 4}, 11)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::sum_to(in[0], {4}); }, {randn({2, 3, 4}, 12)}));
}

TEST(Reduce, SumTo) {
  Tensor g = ones({2, 3, 4});
  EXPECT_EQ(ops::sum_to(g, {3, 1}).to_vector<float>(), (std::vector<float>{8, 8, 8}));
  EXPECT_EQ(ops::sum_to(g, {1, 1, 4}).shape(), (Shape{1, 1, 4}));
  EXPECT_EQ(ops::sum_to(g, {}).item<float>(), 24.f);
  EXPECT_TRUE(ops::sum_to(g, {2, 3, 4}).same(g));
  EXPECT_EQ(ops::sum_to(ones({1, 3}), {3}).shape(), (Shape{3}));
  EXPECT_THROW(ops::sum_to(g, {5}), InvalidArgument);
  EXPECT_THROW(ops::sum_to(g, {2, 2, 3, 4}), InvalidArgument);
  EXPECT_THROW(ops::sum_to(g, {2, 1}), InvalidArgument);
  // Extra leading dims of size 1 in the target are fine.
  EXPECT_EQ(ops::sum_to(g, {1, 1, 3, 1}).to_vector<float>(), (std::vector<float>{8, 8, 8}));
}

TEST(Reduce, BadDims) {
  Tensor x = randn({2, 3}, 1);
  EXPECT_THROW(ops::sum(x, {2}), InvalidArgument);
  EXPECT_THROW(ops::sum(x, {-3}), InvalidArgument);
  EXPECT_THROW(ops::mean(x, {1, -1}), InvalidArgument);  // the same dim twice
  EXPECT_THROW(ops::max(x, 2), InvalidArgument);
  EXPECT_THROW(ops::argmax(x, -3), InvalidArgument);
  EXPECT_THROW(ops::max(zeros({2, 0}), 1), InvalidArgument);
  EXPECT_THROW(ops::sum(from_vector_i64({1}, {1})), InvalidArgument);
  try {
    ops::sum(x, {5});
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("sum"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cohort
