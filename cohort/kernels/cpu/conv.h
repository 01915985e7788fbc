#pragma once
// 2-D convolution (im2col + sgemm) and max pooling, float32, NCHW, contiguous buffers.
//
// Convolution runs one sgemm per sample, straight into y; when one sample's output is small
// (late layers), samples are grouped: the group's im2col columns sit side by side in one
// [C*KH*KW, G*OH*OW] buffer, so each step is one wide sgemm instead of G narrow ones. With more
// than one thread the batch is split into per-thread ranges (single-threaded gemms inside), and
// weight gradients from the ranges are summed in range order: results depend only on the
// thread count, never on scheduling.
#include <cstdint>

namespace cohort::cpu {

struct Conv2dShape {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input x [N, C, H, W]
  int64_t o = 0, kh = 0, kw = 0;       // weight [O, C, KH, KW]
  int64_t stride = 1, pad = 0;
  int64_t oh() const { return (h + 2 * pad - kh) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - kw) / stride + 1; }
  int64_t patch() const { return c * kh * kw; }  // rows of the im2col matrix
};

// One sample. x [C, H, W] -> col [C*KH*KW, ldc] (columns [0, OH*OW) written; ldc >= OH*OW).
void im2col(const Conv2dShape& s, const float* x, float* col, int64_t ldc);
// The adjoint: dx [C, H, W] += col [C*KH*KW, ldc] scattered back (overlaps summed).
void col2im(const Conv2dShape& s, const float* col, int64_t ldc, float* dx);

// Scratch (floats) that conv2d_forward / conv2d_backward need for this shape and thread count.
int64_t conv2d_forward_workspace(const Conv2dShape& s);
int64_t conv2d_backward_workspace(const Conv2dShape& s);

// x [N, C, H, W], w [O, C, KH, KW], bias [O] or null -> y [N, O, OH, OW].
void conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias,
                    float* y, float* workspace);

// Gradients to compute; a null pointer skips that one.
struct Conv2dGrads {
  float* dx = nullptr;  // [N, C, H, W]
  float* dw = nullptr;  // [O, C, KH, KW]
  float* db = nullptr;  // [O]
};
// dy [N, O, OH, OW] with the forward's x and w -> the requested gradients (overwritten).
void conv2d_backward(const Conv2dShape& s, const float* x, const float* w, const float* dy,
                     const Conv2dGrads& grads, float* workspace);

struct Pool2dShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t kernel = 2, stride = 2;
  int64_t oh() const { return (h - kernel) / stride + 1; }
  int64_t ow() const { return (w - kernel) / stride + 1; }
};
// x [N, C, H, W] -> y [N, C, OH, OW]; argmax [N, C, OH, OW] = index h * W + w of the first
// maximum in each window within its (n, c) plane (NaN counts as the maximum, as in PyTorch).
void max_pool2d_forward(const Pool2dShape& s, const float* x, float* y, int32_t* argmax);
// dx [N, C, H, W] = dy routed to the argmax positions (summed where windows overlap).
void max_pool2d_backward(const Pool2dShape& s, const float* dy, const int32_t* argmax, float* dx);

}  // namespace cohort::cpu
