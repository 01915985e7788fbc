// embedding: a row gather forward, a deterministic scatter-add backward into weight.
#include "cohort/autograd/node.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/ops/ops.h"

namespace cohort::ops {
namespace {

struct EmbeddingBackward : autograd::Node {
  Tensor indices;  // int64, contiguous, flattened [n]
  int64_t v = 0, d = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0].contiguous_raw();
    const Device dev = g.device();
    Tensor dw = empty({v, d}, DType::f32, dev);
    dispatch::need(dispatch::kernels_for(dev).embedding_backward, "embedding backward", dev)(
        dev, g.data<float>(), indices.data<int64_t>(), indices.numel(), v, d, dw.data<float>());
    return {dw, Tensor()};
  }
  std::string name() const override { return "EmbeddingBackward"; }
};

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  COHORT_CHECK_ARG(weight.dtype() == DType::f32 && weight.dim() == 2,
                   "embedding: weight must be a 2-D float32 [V, D] tensor, got ",
                   dtype_name(weight.dtype()), " ", shape_str(weight.shape()));
  COHORT_CHECK_ARG(indices.dtype() == DType::i64, "embedding: indices must be int64, got ",
                   dtype_name(indices.dtype()), " (shape ", shape_str(indices.shape()), ")");
  const int64_t v = weight.size(0), d = weight.size(1);
  const Device dev = dispatch::common_device("embedding", {&weight, &indices});
  Tensor idx = indices.contiguous_raw();
  const Tensor idx_host = idx.to(Device::cpu());  // the range check reads every index
  const int64_t* ip = idx_host.data<int64_t>();
  const int64_t n = idx.numel();
  for (int64_t i = 0; i < n; ++i) {
    COHORT_CHECK_ARG(ip[i] >= 0 && ip[i] < v, "embedding: index ", ip[i], " at position ", i,
                     " of indices ", shape_str(indices.shape()), " is out of range for weight ",
                     shape_str(weight.shape()), " (V = ", v, ")");
  }
  Tensor w = weight.contiguous_raw();
  Shape out_shape = indices.shape();
  out_shape.push_back(d);
  Tensor out = empty(out_shape, DType::f32, dev);
  dispatch::need(dispatch::kernels_for(dev).embedding_forward, "embedding", dev)(
      dev, w.data<float>(), v, d, idx.data<int64_t>(), n, out.data<float>());
  if (auto node = autograd::make_node<EmbeddingBackward>({weight, indices})) {
    node->indices = idx;
    node->v = v;
    node->d = d;
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace cohort::ops
