// causal_attention: fused scaled-dot-product attention with a causal mask (kernels/cpu/
// attention.h). q, k, v may be strided views (e.g. permuted slices of one qkv projection) as
// long as their last dim is contiguous; the kernel reads them in place. Under train.precision =
// "bf16" (ops::matmul_precision() at forward time, recorded for backward as matmul's nodes do)
// it runs the bf16 kernels: q, k, v rounded to bf16, f32 accumulation (tensor cores on a GPU).
#include "cohort/autograd/node.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/ops/checks.h"
#include "cohort/ops/ops.h"

namespace cohort::ops {
namespace {

// A view the kernel can read in place: last dim contiguous (or of size 1).
Tensor readable(const Tensor& t) {
  return (t.strides()[3] == 1 || t.size(3) == 1) ? t.detach() : t.clone_raw();
}

cpu::AttnStrides strides_of(const Tensor& t) {
  return {t.strides()[0], t.strides()[1], t.strides()[2]};
}

cpu::AttnInputs inputs_of(const Tensor& q, const Tensor& k, const Tensor& v) {
  return {q.data<float>(), k.data<float>(), v.data<float>(),
          strides_of(q),   strides_of(k),   strides_of(v)};
}

struct CausalAttentionBackward : autograd::Node {
  Tensor q, k, v, lse;
  MatmulPrecision precision = MatmulPrecision::kF32;
  Tensor out;  // forward's output, kept in bf16 only (its backward's D = rowsum(dout * out))
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0].contiguous_raw();
    const Shape& s = q.shape();
    const Device d = q.device();
    Tensor dq = empty(s, DType::f32, d), dk = empty(s, DType::f32, d), dv = empty(s, DType::f32, d);
    const cpu::AttnShape shape{s[0], s[1], s[2], s[3]};
    const dispatch::KernelTable& kt = dispatch::kernels_for(d);
    if (precision == MatmulPrecision::kBF16) {
      dispatch::need(kt.causal_attention_backward_bf16, "causal_attention backward in bf16", d)(
          d, shape, inputs_of(q, k, v), out.data<float>(), g.data<float>(), lse.data<float>(),
          dq.data<float>(), dk.data<float>(), dv.data<float>());
    } else {
      dispatch::need(kt.causal_attention_backward, "causal_attention backward", d)(
          d, shape, inputs_of(q, k, v), g.data<float>(), lse.data<float>(), dq.data<float>(),
          dk.data<float>(), dv.data<float>());
    }
    return {dq, dk, dv};
  }
  std::string name() const override { return "CausalAttentionBackward"; }
};

}  // namespace

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const Device d = dispatch::common_device("causal_attention", {&q, &k, &v});
  for (const Tensor* t : {&q, &k, &v}) {
    COHORT_CHECK_ARG(t->dtype() == DType::f32, "causal_attention: q, k, v must be float32, got ",
                     dtype_name(t->dtype()), " (shape ", shape_str(t->shape()), ")");
  }
  COHORT_CHECK_ARG(q.dim() == 4, "causal_attention: q must be 4-D [B, H, T, Dh], got ",
                   shape_str(q.shape()));
  COHORT_CHECK_ARG(k.shape() == q.shape() && v.shape() == q.shape(), "causal_attention: q ",
                   shape_str(q.shape()), ", k ", shape_str(k.shape()), " and v ",
                   shape_str(v.shape()), " must have the same shape [B, H, T, Dh]");
  COHORT_CHECK_ARG(q.size(3) >= 1, "causal_attention: head dim Dh must be >= 1, got q ",
                   shape_str(q.shape()));
  const Shape& s = q.shape();
  Tensor qr = readable(q), kr = readable(k), vr = readable(v);
  Tensor out = empty(s, DType::f32, d), lse = empty({s[0], s[1], s[2]}, DType::f32, d);
  const MatmulPrecision p = matmul_precision();
  const dispatch::KernelTable& kt = dispatch::kernels_for(d);
  const auto forward = p == MatmulPrecision::kBF16
                           ? dispatch::need(kt.causal_attention_forward_bf16,
                                            "causal_attention in bf16 (train.precision)", d)
                           : dispatch::need(kt.causal_attention_forward, "causal_attention", d);
  forward(d, {s[0], s[1], s[2], s[3]}, inputs_of(qr, kr, vr), out.data<float>(), lse.data<float>());
  if (auto node = autograd::make_node<CausalAttentionBackward>({q, k, v})) {
    node->q = qr;
    node->k = kr;
    node->v = vr;
    node->lse = lse;
    node->precision = p;
    if (p == MatmulPrecision::kBF16) node->out = out.detach();
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace cohort::ops
