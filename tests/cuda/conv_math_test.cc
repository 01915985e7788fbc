// conv.cu's per-element arithmetic (kernels/cuda/conv_math.h: im2col's source index, col2im's
// gather, the pooling windows) run on the CPU against kernels/cpu/conv.h, bit for bit: what is
// left for the GPU tests is the launch (grids, groups of samples, the gemms).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cohort/kernels/cpu/conv.h"
#include "cohort/kernels/cuda/conv_math.h"
#include "tests/cuda/random_floats.h"

namespace cohort::cuda::math {
namespace {

using testing::random_floats;

// Odd sizes, rectangular inputs and kernels, every stride and padding the models use and more
// (stride > kernel leaves input pixels no window reads).
std::vector<cpu::Conv2dShape> conv_shapes() {
  std::vector<cpu::Conv2dShape> out;
  for (int64_t k : {1, 2, 3, 5})
    for (int64_t stride : {1, 2, 3})
      for (int64_t pad : {0, 1, 2}) {
        cpu::Conv2dShape s{.n = 1,
                           .c = 3,
                           .h = 13,
                           .w = 11,
                           .o = 1,
                           .kh = k,
                           .kw = k,
                           .stride = stride,
                           .pad = pad};
        if (s.oh() > 0 && s.ow() > 0) out.push_back(s);
      }
  out.push_back({.n = 1, .c = 2, .h = 9, .w = 14, .o = 1, .kh = 3, .kw = 5, .stride = 2, .pad = 1});
  out.push_back(
      {.n = 1, .c = 1, .h = 28, .w = 28, .o = 1, .kh = 3, .kw = 3, .stride = 1, .pad = 1});
  return out;
}

std::string describe(const cpu::Conv2dShape& s) {
  return "C " + std::to_string(s.c) + ", " + std::to_string(s.h) + "x" + std::to_string(s.w) +
         ", kernel " + std::to_string(s.kh) + "x" + std::to_string(s.kw) + ", stride " +
         std::to_string(s.stride) + ", pad " + std::to_string(s.pad);
}

TEST(ConvMath, ConvTargetInvertsConvSource) {
  for (int64_t stride : {1, 2, 3})
    for (int64_t pad : {0, 1, 2})
      for (int64_t k = 0; k < 5; ++k) {
        const int64_t in_len = 11, out_len = (in_len + 2 * pad - 5) / stride + 1;
        for (int64_t i = 0; i < in_len; ++i) {
          int64_t want = -1;  // the output position reading i at offset k, by brute force
          for (int64_t o = 0; o < out_len; ++o)
            if (conv_source(o, k, stride, pad, in_len) == i) want = o;
          EXPECT_EQ(conv_target(i, k, stride, pad, out_len), want)
              << "i " << i << ", k " << k << ", stride " << stride << ", pad " << pad;
        }
      }
}

TEST(ConvMath, Im2colValueMatchesCpuIm2col) {
  for (const auto& s : conv_shapes()) {
    const int64_t len = s.oh() * s.ow(), ldc = len + 3;  // a wider ldc: only [0, len) is read
    const auto x = random_floats(s.c * s.h * s.w, 1);
    std::vector<float> want(s.patch() * ldc, NAN);
    cpu::im2col(s, x.data(), want.data(), ldc);
    const ConvGeom g = conv_geom(s);
    for (int64_t r = 0; r < s.patch(); ++r)
      for (int64_t l = 0; l < len; ++l)
        ASSERT_EQ(im2col_value(x.data(), g, r, l), want[r * ldc + l])
            << describe(s) << ": row " << r << ", column " << l;
  }
}

TEST(ConvMath, Col2imValueMatchesCpuCol2imBitForBit) {
  for (const auto& s : conv_shapes()) {
    const int64_t len = s.oh() * s.ow(), ldc = 2 * len;  // as one sample of a group of two
    const auto col = random_floats(s.patch() * ldc, 2);
    std::vector<float> want(s.c * s.h * s.w, 0.f);
    cpu::col2im(s, col.data(), ldc, want.data());
    const ConvGeom g = conv_geom(s);
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t iy = 0; iy < s.h; ++iy)
        for (int64_t ix = 0; ix < s.w; ++ix)
          ASSERT_EQ(col2im_value(col.data(), ldc, g, c, iy, ix), want[(c * s.h + iy) * s.w + ix])
              << describe(s) << ": c " << c << ", y " << iy << ", x " << ix;
  }
}

std::vector<cpu::Pool2dShape> pool_shapes() {
  std::vector<cpu::Pool2dShape> out;
  for (int64_t kernel : {1, 2, 3})
    for (int64_t stride : {1, 2, 3})
      out.push_back({.n = 2, .c = 3, .h = 13, .w = 10, .kernel = kernel, .stride = stride});
  out.push_back({.n = 2, .c = 2, .h = 28, .w = 28, .kernel = 2, .stride = 2});
  return out;
}

// Inputs from a few values, so windows hold ties; some NaNs.
std::vector<float> tied_inputs(size_t n, uint32_t seed) {
  std::vector<float> x = random_floats(n, seed, -3.f, 3.f);
  for (size_t i = 0; i < n; ++i) x[i] = std::round(x[i]);
  for (size_t i = 7; i < n; i += 97) x[i] = NAN;
  return x;
}

TEST(ConvMath, WindowsContainingMatchBruteForce) {
  for (int64_t kernel : {1, 2, 3, 5})
    for (int64_t stride : {1, 2, 3, 4}) {
      const int64_t in_len = 17, out_len = (in_len - kernel) / stride + 1;
      for (int64_t i = 0; i < in_len; ++i) {
        int64_t lo = -1, hi = -1;
        for (int64_t o = 0; o < out_len; ++o) {
          if (i < o * stride || i >= o * stride + kernel) continue;
          if (lo < 0) lo = o;
          hi = o + 1;
        }
        const IndexRange r = pool_windows_containing(i, kernel, stride, out_len);
        if (lo < 0) {
          EXPECT_EQ(r.lo, r.hi) << "i " << i << ", kernel " << kernel << ", stride " << stride;
        } else {
          EXPECT_EQ(r.lo, lo) << "i " << i << ", kernel " << kernel << ", stride " << stride;
          EXPECT_EQ(r.hi, hi) << "i " << i << ", kernel " << kernel << ", stride " << stride;
        }
      }
    }
}

TEST(ConvMath, MaxPoolWindowAndGradMatchCpuBitForBit) {
  for (const auto& s : pool_shapes()) {
    const int64_t planes = s.n * s.c, in_plane = s.h * s.w, out_plane = s.oh() * s.ow();
    const auto x = tied_inputs(planes * in_plane, 3);
    std::vector<float> y(planes * out_plane);
    std::vector<int32_t> argmax(planes * out_plane);
    cpu::max_pool2d_forward(s, x.data(), y.data(), argmax.data());
    const PoolGeom g = pool_geom(s);
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          float v;
          int32_t idx;
          max_pool_window(x.data() + p * in_plane, g, oy, ox, v, idx);
          const int64_t k = p * out_plane + oy * g.ow + ox;
          ASSERT_EQ(idx, argmax[k]) << "kernel " << s.kernel << ", stride " << s.stride;
          ASSERT_TRUE(v == y[k] || (std::isnan(v) && std::isnan(y[k])));
        }
    const auto dy = random_floats(planes * out_plane, 4);
    std::vector<float> want(planes * in_plane);
    cpu::max_pool2d_backward(s, dy.data(), argmax.data(), want.data());
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t iy = 0; iy < s.h; ++iy)
        for (int64_t ix = 0; ix < s.w; ++ix)
          ASSERT_EQ(
              max_pool_grad(dy.data() + p * out_plane, argmax.data() + p * out_plane, g, iy, ix),
              want[p * in_plane + iy * s.w + ix])
              << "kernel " << s.kernel << ", stride " << s.stride << ", y " << iy << ", x " << ix;
  }
}

}  // namespace
}  // namespace cohort::cuda::math
