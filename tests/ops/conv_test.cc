#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "cohort/core/thread_pool.h"
#include "cohort/ops/ops.h"
#include "tests/ops/error_message.h"
#include "tests/support/gradcheck.h"

namespace cohort {
namespace {

using testing::contains;
using testing::gradcheck;
using testing::invalid_argument_message;

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw, stride, pad;
  bool bias;
};

// x [N, C, H, W] at (n, c, y, x), zero outside.
float at(const std::vector<float>& v, const ConvCase& k, int64_t n, int64_t c, int64_t y,
         int64_t x) {
  if (y < 0 || y >= k.h || x < 0 || x >= k.w) return 0;
  return v[size_t(((n * k.c + c) * k.h + y) * k.w + x)];
}

int64_t out_h(const ConvCase& k) {
  return (k.h + 2 * k.pad - k.kh) / k.stride + 1;
}
int64_t out_w(const ConvCase& k) {
  return (k.w + 2 * k.pad - k.kw) / k.stride + 1;
}

// The definition, one output at a time.
std::vector<float> naive_conv(const ConvCase& k, const std::vector<float>& x,
                              const std::vector<float>& w, const std::vector<float>& b) {
  std::vector<float> y;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t oy = 0; oy < out_h(k); ++oy)
        for (int64_t ox = 0; ox < out_w(k); ++ox) {
          double s = k.bias ? b[size_t(o)] : 0.0;
          for (int64_t c = 0; c < k.c; ++c)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j)
                s += double(at(x, k, n, c, oy * k.stride - k.pad + i, ox * k.stride - k.pad + j)) *
                     w[size_t(((o * k.c + c) * k.kh + i) * k.kw + j)];
          y.push_back(float(s));
        }
  return y;
}

// Gradients of sum(g * conv(x, w, b)) by the same loops: each product's contribution.
void naive_conv_backward(const ConvCase& k, const std::vector<float>& x,
                         const std::vector<float>& w, const std::vector<float>& g,
                         std::vector<double>& dx, std::vector<double>& dw,
                         std::vector<double>& db) {
  dx.assign(size_t(k.n * k.c * k.h * k.w), 0);
  dw.assign(size_t(k.o * k.c * k.kh * k.kw), 0);
  db.assign(size_t(k.o), 0);
  size_t gi = 0;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t oy = 0; oy < out_h(k); ++oy)
        for (int64_t ox = 0; ox < out_w(k); ++ox, ++gi) {
          db[size_t(o)] += g[gi];
          for (int64_t c = 0; c < k.c; ++c)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                int64_t y = oy * k.stride - k.pad + i, xx = ox * k.stride - k.pad + j;
                if (y < 0 || y >= k.h || xx < 0 || xx >= k.w) continue;
                size_t wi = size_t(((o * k.c + c) * k.kh + i) * k.kw + j);
                size_t xi = size_t(((n * k.c + c) * k.h + y) * k.w + xx);
                dw[wi] += double(g[gi]) * x[xi];
                dx[xi] += double(g[gi]) * w[wi];
              }
        }
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " element " << i;
}

// Forward and all three gradients against the loops, with one thread and with three (the
// batch split into per-thread ranges; small outputs grouped within a range).
void check_against_loops(const ConvCase& k, uint64_t seed) {
  Tensor x = randn({k.n, k.c, k.h, k.w}, seed).set_requires_grad(true);
  Tensor w = randn({k.o, k.c, k.kh, k.kw}, seed + 1).set_requires_grad(true);
  Tensor b = k.bias ? randn({k.o}, seed + 2).set_requires_grad(true) : Tensor();
  std::vector<float> xv = x.to_vector<float>(), wv = w.to_vector<float>();
  std::vector<float> bv = k.bias ? b.to_vector<float>() : std::vector<float>();
  std::vector<float> want = naive_conv(k, xv, wv, bv);
  Tensor g = randn({k.n, k.o, out_h(k), out_w(k)}, seed + 3);
  std::vector<double> dx, dw, db;
  naive_conv_backward(k, xv, wv, g.to_vector<float>(), dx, dw, db);
  for (int threads : {1, 3}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    set_num_threads(threads);
    for (Tensor t : {x, w, b})
      if (t.defined()) t.set_grad(Tensor());
    Tensor y = ops::conv2d(x, w, b, {.stride = k.stride, .padding = k.pad});
    ASSERT_EQ(y.shape(), g.shape());
    expect_close(y.to_vector<float>(), std::vector<double>(want.begin(), want.end()), 1e-4, "y");
    y.backward(g);
    expect_close(x.grad().to_vector<float>(), dx, 1e-4, "dx");
    expect_close(w.grad().to_vector<float>(), dw, 1e-4, "dw");
    if (k.bias) expect_close(b.grad().to_vector<float>(), db, 1e-4, "db");
  }
  set_num_threads(0);
}

TEST(Conv2d, MatchesLoopsAcrossStridesAndPadding) {
  check_against_loops({2, 3, 7, 6, 4, 3, 3, 1, 0, true}, 10);
  check_against_loops({3, 2, 8, 8, 5, 3, 3, 2, 1, true}, 20);
  check_against_loops({2, 2, 6, 9, 3, 2, 4, 1, 2, false}, 30);   // non-square kernel, wide pad
  check_against_loops({4, 1, 28, 28, 8, 3, 3, 1, 0, true}, 40);  // the CNN's first layer
  check_against_loops({1, 3, 5, 5, 2, 1, 1, 3, 0, true}, 50);    // 1x1, stride > kernel
}

TEST(Conv2d, WideChannelStackMatchesLoops) {
  // 32 channels x 3x3 over 32x32 with padding: a 288-row im2col per sample, one gemm each.
  check_against_loops({2, 32, 32, 32, 4, 3, 3, 1, 1, true}, 60);
}

// Runs forward and backward; returns y, dx, dw, db.
std::vector<std::vector<float>> conv_run(const Tensor& x, const Tensor& w, const Tensor& b) {
  for (Tensor t : {x, w, b}) t.set_grad(Tensor());
  Tensor y = ops::conv2d(x, w, b, {.stride = 1, .padding = 1});
  y.backward(randn(y.shape(), 4));
  return {y.to_vector<float>(), x.grad().to_vector<float>(), w.grad().to_vector<float>(),
          b.grad().to_vector<float>()};
}

TEST(Conv2d, ReproducibleForAThreadCountAndCloseAcrossThem) {
  Tensor x = randn({5, 3, 9, 9}, 1).set_requires_grad(true);
  Tensor w = randn({4, 3, 3, 3}, 2).set_requires_grad(true);
  Tensor b = randn({4}, 3).set_requires_grad(true);
  std::vector<std::vector<float>> runs[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    runs[threads - 1] = conv_run(x, w, b);
    EXPECT_EQ(conv_run(x, w, b), runs[threads - 1]) << threads << " threads";
  }
  set_num_threads(0);
  // Another thread count splits the batch differently (gemm shapes, order of the dw sum).
  for (size_t k = 0; k < 4; ++k)
    for (size_t i = 0; i < runs[0][k].size(); ++i)
      EXPECT_NEAR(runs[0][k][i], runs[1][k][i], 1e-4 * (1 + std::abs(runs[0][k][i])));
}

TEST(Conv2d, EmptyBatchGivesZeroWeightGradients) {
  Tensor w = randn({3, 2, 3, 3}, 1).set_requires_grad(true);
  Tensor b = randn({3}, 2).set_requires_grad(true);
  Tensor y = ops::conv2d(zeros({0, 2, 5, 5}), w, b);
  EXPECT_EQ(y.shape(), (Shape{0, 3, 3, 3}));
  y.backward(zeros(y.shape()));
  EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(54, 0.0f));
  EXPECT_EQ(b.grad().to_vector<float>(), std::vector<float>(3, 0.0f));
}

TEST(Conv2d, Gradients) {
  auto conv = [](ops::Conv2dOptions opt) {
    return [opt](const std::vector<Tensor>& in) { return ops::conv2d(in[0], in[1], in[2], opt); };
  };
  std::vector<Tensor> inputs = {randn({2, 2, 5, 5}, 1), randn({3, 2, 3, 3}, 2), randn({3}, 3)};
  EXPECT_TRUE(gradcheck(conv({.stride = 1, .padding = 0}), inputs));
  inputs = {randn({2, 2, 5, 5}, 4), randn({3, 2, 3, 3}, 5), randn({3}, 6)};
  EXPECT_TRUE(gradcheck(conv({.stride = 2, .padding = 1}), inputs));
  inputs = {randn({2, 2, 5, 5}, 7), randn({3, 2, 3, 3}, 8), randn({3}, 9)};
  EXPECT_TRUE(gradcheck(conv({.stride = 1, .padding = 1}), inputs));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::conv2d(in[0], in[1]); },
                        {randn({2, 2, 5, 5}, 10), randn({2, 2, 2, 3}, 11)}));
}

TEST(Conv2d, ShapeErrorsNameBothShapes) {
  EXPECT_EQ(invalid_argument_message([] {
              ops::conv2d(randn({2, 3, 8, 8}, 1), randn({4, 2, 3, 3}, 2));
            }),
            "conv2d: x [2, 3, 8, 8] has 3 channels but weight [4, 2, 3, 3] expects 2");
  EXPECT_TRUE(
      contains(invalid_argument_message([] {
                 ops::conv2d(randn({1, 1, 2, 2}, 1), randn({1, 1, 3, 3}, 2));
               }),
               "conv2d: kernel 3x3 of weight [1, 1, 3, 3] does not fit the padded input 2x2 of x "
               "[1, 1, 2, 2]"));
  EXPECT_EQ(invalid_argument_message([] {
              ops::conv2d(randn({1, 1, 4, 4}, 1), randn({2, 1, 3, 3}, 2), randn({3}, 3));
            }),
            "conv2d: bias [3] does not match weight [2, 1, 3, 3] (2 output channels)");
  EXPECT_TRUE(contains(invalid_argument_message([] {
                         ops::conv2d(randn({1, 4, 4}, 1), randn({2, 1, 3, 3}, 2));
                       }),
                       "conv2d: x must be 4-D [N, C, H, W], got [1, 4, 4]"));
  EXPECT_TRUE(contains(
      invalid_argument_message([] {
        ops::conv2d(randn({1, 1, 4, 4}, 1), randn({2, 1, 3, 3}, 2), Tensor(), {.stride = 0});
      }),
      "stride must be >= 1"));
}

// Distinct values 0.1 apart in shuffled order: no ties, so finite differences never move an
// argmax.
Tensor distinct_values(const Shape& shape, uint64_t seed) {
  std::vector<float> r = rand(shape, seed).to_vector<float>();
  std::vector<size_t> order(r.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r[a] < r[b]; });
  std::vector<float> v(r.size());
  for (size_t i = 0; i < order.size(); ++i) v[order[i]] = 0.1f * float(i) - 3.0f;
  return from_vector(v, shape);
}

TEST(MaxPool2d, MatchesLoopsAndRoutesGradientsToTheMaximum) {
  const int64_t n = 2, c = 3, h = 7, w = 6, k = 3, s = 2, oh = 3, ow = 2;
  Tensor x = distinct_values({n, c, h, w}, 1).set_requires_grad(true);
  Tensor y = ops::max_pool2d(x, k, s);
  ASSERT_EQ(y.shape(), (Shape{n, c, oh, ow}));
  Tensor g = randn(y.shape(), 2);
  y.backward(g);
  std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>(),
                     gv = g.to_vector<float>();
  std::vector<float> dx(xv.size(), 0.0f);
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        size_t best = 0;
        float bv = -1e30f;
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            size_t xi = size_t((p * h + oy * s + i) * w + ox * s + j);
            if (xv[xi] > bv) bv = xv[xi], best = xi;
          }
        size_t yi = size_t((p * oh + oy) * ow + ox);
        EXPECT_EQ(yv[yi], bv);
        dx[best] += gv[yi];  // overlapping windows (k > s) add up
      }
  std::vector<float> got = x.grad().to_vector<float>();
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(got[i], dx[i], 1e-6) << i;
}

TEST(MaxPool2d, Gradients) {
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::max_pool2d(in[0], 2); },
                        {distinct_values({2, 2, 5, 5}, 3)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::max_pool2d(in[0], 3, 1); },
                        {distinct_values({1, 2, 5, 4}, 4)}));
}

TEST(MaxPool2d, StrideZeroMeansKernelAndErrorsAreClear) {
  EXPECT_EQ(ops::max_pool2d(randn({1, 1, 6, 6}, 1), 2).shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(invalid_argument_message([] {
              ops::max_pool2d(randn({1, 2, 3, 5}, 1), 4);
            }),
            "max_pool2d: kernel 4 is larger than the input plane 3x5 of x [1, 2, 3, 5]");
  EXPECT_TRUE(contains(invalid_argument_message([] {
                         ops::max_pool2d(randn({3, 5}, 1), 2);
                       }),
                       "max_pool2d: x must be 4-D [N, C, H, W], got [3, 5]"));
}

}  // namespace
}  // namespace cohort
