// dropout with a regenerated Philox mask: nothing is stored between forward and backward.
#include <cmath>

#include "cohort/autograd/node.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/ops/checks.h"
#include "cohort/ops/ops.h"

namespace cohort::ops {
namespace {

struct DropoutBackward : autograd::Node {
  float p = 0;
  uint64_t seed = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0].contiguous_raw();
    const Device d = g.device();
    Tensor dx = empty(g.shape(), DType::f32, d);
    dispatch::need(dispatch::kernels_for(d).dropout_apply, "dropout backward", d)(
        d, g.data<float>(), g.numel(), p, seed, dx.data<float>());
    return {dx};
  }
  std::string name() const override { return "DropoutBackward"; }
};

}  // namespace

Tensor dropout(const Tensor& x, double p, uint64_t seed) {
  COHORT_CHECK_ARG(x.dtype() == DType::f32, "dropout: x must be float32, got ",
                   dtype_name(x.dtype()), " (shape ", shape_str(x.shape()), ")");
  COHORT_CHECK_ARG(std::isfinite(p) && p >= 0.0 && float(p) < 1.0f,
                   "dropout: p must be in [0, 1), got ", p);
  if (p == 0.0) return x;
  Tensor xc = x.contiguous_raw();
  const Device d = x.device();
  Tensor y = empty(x.shape(), DType::f32, d);
  dispatch::need(dispatch::kernels_for(d).dropout_apply, "dropout", d)(
      d, xc.data<float>(), xc.numel(), float(p), seed, y.data<float>());
  if (auto node = autograd::make_node<DropoutBackward>({x})) {
    node->p = float(p);
    node->seed = seed;
    autograd::set_history(y, node);
  }
  return y;
}

}  // namespace cohort::ops
