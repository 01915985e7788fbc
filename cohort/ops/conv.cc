// conv2d (im2col + sgemm) and max_pool2d, NCHW float32. Inputs are made contiguous once;
// kernels/cpu/conv.h does the work and documents the threading.
#include "cohort/autograd/node.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/ops/checks.h"
#include "cohort/ops/ops.h"

namespace cohort::ops {
namespace {

using dispatch::kernels_for;
using dispatch::need;

// Scratch for one kernel call on `d`, from its caching allocator (no allocation after step one).
Tensor workspace(int64_t floats, Device d) {
  return empty({std::max<int64_t>(floats, 1)}, DType::f32, d);
}

struct Conv2dBackward : autograd::Node {
  Tensor x, w;  // contiguous, detached
  cpu::Conv2dShape s;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0].contiguous_raw();
    const Device d = x.device();
    const dispatch::KernelTable& k = kernels_for(d);
    Tensor dx, dw, db;
    cpu::Conv2dGrads out;
    if (needs_grad(0)) out.dx = (dx = empty(x.shape(), DType::f32, d)).data<float>();
    if (needs_grad(1)) out.dw = (dw = empty(w.shape(), DType::f32, d)).data<float>();
    if (needs_grad(2)) out.db = (db = empty({s.o}, DType::f32, d)).data<float>();
    Tensor ws = workspace(need(k.conv2d_backward_workspace, "conv2d backward", d)(d, s), d);
    need(k.conv2d_backward, "conv2d backward", d)(d, s, x.data<float>(), w.data<float>(),
                                                  g.data<float>(), out, ws.data<float>());
    return {dx, dw, db};
  }
  std::string name() const override { return "Conv2dBackward"; }
};

cpu::Conv2dShape conv_shape(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const Conv2dOptions& opt) {
  const std::string xs = shape_str(x.shape()), ws = shape_str(weight.shape());
  COHORT_CHECK_ARG(x.dim() == 4, "conv2d: x must be 4-D [N, C, H, W], got ", xs);
  COHORT_CHECK_ARG(weight.dim() == 4, "conv2d: weight must be 4-D [O, C, KH, KW], got ", ws);
  COHORT_CHECK_ARG(x.size(1) == weight.size(1), "conv2d: x ", xs, " has ", x.size(1),
                   " channels but weight ", ws, " expects ", weight.size(1));
  COHORT_CHECK_ARG(opt.stride >= 1 && opt.padding >= 0, "conv2d: stride must be >= 1 and padding",
                   " >= 0, got stride ", opt.stride, " padding ", opt.padding);
  cpu::Conv2dShape s{x.size(0),      x.size(1),      x.size(2),  x.size(3),  weight.size(0),
                     weight.size(2), weight.size(3), opt.stride, opt.padding};
  COHORT_CHECK_ARG(s.kh >= 1 && s.kw >= 1 && s.h + 2 * s.pad >= s.kh && s.w + 2 * s.pad >= s.kw,
                   "conv2d: kernel ", s.kh, "x", s.kw, " of weight ", ws,
                   " does not fit the padded input ", s.h + 2 * s.pad, "x", s.w + 2 * s.pad,
                   " of x ", xs, " (padding ", s.pad, ")");
  if (bias.defined()) {
    check_f32(bias, "conv2d", "bias");
    COHORT_CHECK_ARG(bias.dim() == 1 && bias.size(0) == s.o, "conv2d: bias ",
                     shape_str(bias.shape()), " does not match weight ", ws, " (", s.o,
                     " output channels)");
  }
  return s;
}

struct MaxPool2dBackward : autograd::Node {
  Tensor argmax;  // int32 [N, C, OH, OW]
  cpu::Pool2dShape s;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0].contiguous_raw();
    const Device d = g.device();
    Tensor dx = empty({s.n, s.c, s.h, s.w}, DType::f32, d);
    need(kernels_for(d).max_pool2d_backward, "max_pool2d backward", d)(
        d, s, g.data<float>(), argmax.data<int32_t>(), dx.data<float>());
    return {dx};
  }
  std::string name() const override { return "MaxPool2dBackward"; }
};

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Conv2dOptions opt) {
  check_f32(x, "conv2d", "x");
  check_f32(weight, "conv2d", "weight");
  const cpu::Conv2dShape s = conv_shape(x, weight, bias, opt);
  Tensor xc = x.contiguous_raw(), wc = weight.contiguous_raw();
  Tensor bc = bias.defined() ? bias.contiguous_raw() : Tensor();
  const Device d = dispatch::common_device("conv2d", {&x, &weight, &bias});
  const dispatch::KernelTable& k = kernels_for(d);
  Tensor y = empty({s.n, s.o, s.oh(), s.ow()}, DType::f32, d);
  {
    Tensor ws = workspace(need(k.conv2d_forward_workspace, "conv2d", d)(d, s), d);
    need(k.conv2d_forward, "conv2d", d)(d, s, xc.data<float>(), wc.data<float>(),
                                        bc.defined() ? bc.data<float>() : nullptr, y.data<float>(),
                                        ws.data<float>());
  }
  if (auto node = autograd::make_node<Conv2dBackward>({x, weight, bias})) {
    node->x = xc;
    node->w = wc;
    node->s = s;
    autograd::set_history(y, node);
  }
  return y;
}

Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride) {
  check_f32(x, "max_pool2d", "x");
  COHORT_CHECK_ARG(x.dim() == 4, "max_pool2d: x must be 4-D [N, C, H, W], got ",
                   shape_str(x.shape()));
  if (stride == 0) stride = kernel;
  COHORT_CHECK_ARG(kernel >= 1 && stride >= 1, "max_pool2d: kernel and stride must be >= 1, got ",
                   "kernel ", kernel, " stride ", stride);
  cpu::Pool2dShape s{x.size(0), x.size(1), x.size(2), x.size(3), kernel, stride};
  COHORT_CHECK_ARG(s.h >= kernel && s.w >= kernel, "max_pool2d: kernel ", kernel,
                   " is larger than the input plane ", s.h, "x", s.w, " of x ",
                   shape_str(x.shape()));
  COHORT_CHECK_ARG(s.h * s.w <= INT32_MAX, "max_pool2d: plane ", s.h, "x", s.w,
                   " too large for int32 argmax indices");
  Tensor xc = x.contiguous_raw();
  const Device d = x.device();
  Tensor y = empty({s.n, s.c, s.oh(), s.ow()}, DType::f32, d);
  Tensor idx = empty(y.shape(), DType::i32, d);
  need(kernels_for(d).max_pool2d_forward, "max_pool2d", d)(d, s, xc.data<float>(), y.data<float>(),
                                                           idx.data<int32_t>());
  if (auto node = autograd::make_node<MaxPool2dBackward>({x})) {
    node->argmax = idx;
    node->s = s;
    autograd::set_history(y, node);
  }
  return y;
}

}  // namespace cohort::ops
