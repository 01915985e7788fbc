// layer_norm over the last dim, fused: one kernel pass forward (keeping mean and 1/std per row)
// and one backward for x, weight and bias together.
#include "cohort/autograd/node.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/ops/checks.h"
#include "cohort/ops/ops.h"

namespace cohort::ops {
namespace {

const float* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<float>() : nullptr;
}

struct LayerNormBackward : autograd::Node {
  Tensor x, w, mean, rstd;  // x contiguous [rows, d]; w [d] or undefined
  Shape x_shape;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0].contiguous_raw();
    const int64_t rows = x.size(0), d = x.size(1);
    const Device dev = x.device();
    Tensor dx, dw, db;
    cpu::LayerNormGrads out;
    if (needs_grad(0)) out.dx = (dx = empty(x_shape, DType::f32, dev)).data<float>();
    if (needs_grad(1)) out.dw = (dw = empty({d}, DType::f32, dev)).data<float>();
    if (needs_grad(2)) out.db = (db = empty({d}, DType::f32, dev)).data<float>();
    dispatch::need(dispatch::kernels_for(dev).layer_norm_backward, "layer_norm backward", dev)(
        dev, g.data<float>(), x.data<float>(), ptr_or_null(w), mean.data<float>(),
        rstd.data<float>(), rows, d, out);
    return {dx, dw, db};
  }
  std::string name() const override { return "LayerNormBackward"; }
};

// weight and bias may be undefined (no affine part), else [D] matching x's last dim.
Tensor checked_param(const Tensor& p, const Tensor& x, const char* name) {
  if (!p.defined()) return p;
  check_f32(p, "layer_norm", name);
  COHORT_CHECK_ARG(p.dim() == 1 && p.size(0) == x.size(-1), "layer_norm: ", name, " ",
                   shape_str(p.shape()), " does not match x ", shape_str(x.shape()),
                   " (normalised dim ", x.size(-1), ")");
  return p.contiguous_raw();
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_f32(x, "layer_norm", "x");
  COHORT_CHECK_ARG(x.dim() >= 1, "layer_norm: x must have at least one dim, got ",
                   shape_str(x.shape()));
  COHORT_CHECK_ARG(eps > 0, "layer_norm: eps must be positive, got ", eps);
  Tensor w = checked_param(weight, x, "weight"), b = checked_param(bias, x, "bias");
  const int64_t d = x.size(-1), rows = d == 0 ? 0 : x.numel() / d;
  Tensor xc = x.contiguous_raw();
  xc = xc.as_strided({rows, d}, {d, 1}, xc.offset());
  const Device dev = dispatch::common_device("layer_norm", {&x, &weight, &bias});
  Tensor y = empty(x.shape(), DType::f32, dev), mean = empty({rows}, DType::f32, dev),
         rstd = empty({rows}, DType::f32, dev);
  dispatch::need(dispatch::kernels_for(dev).layer_norm_forward, "layer_norm", dev)(
      dev, xc.data<float>(), ptr_or_null(w), ptr_or_null(b), rows, d, float(eps), y.data<float>(),
      mean.data<float>(), rstd.data<float>());
  if (auto node = autograd::make_node<LayerNormBackward>({x, weight, bias})) {
    node->x = xc;
    node->w = w;
    node->mean = mean;
    node->rstd = rstd;
    node->x_shape = x.shape();
    autograd::set_history(y, node);
  }
  return y;
}

}  // namespace cohort::ops
