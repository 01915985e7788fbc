#include "cohort/autograd/node.h"

#include <atomic>

#include "cohort/autograd/engine.h"

namespace cohort::autograd {
namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
thread_local bool t_grad_enabled = true;
}  // namespace

Node::Node(uint32_t num_outputs)
    : num_outputs_(num_outputs),
      sequence_nr_(g_next_sequence_nr.fetch_add(1)),
      scope_(current_scope()) {}

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : Node(1), leaf_(leaf) {}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  auto leaf = leaf_.lock();
  if (!leaf || !grads[0].defined()) return {};
  Tensor param(leaf);
  const Tensor& g = grads[0];
  COHORT_INTERNAL(g.shape() == param.shape(), "gradient of shape ", shape_str(g.shape()),
                  " for a parameter of shape ", shape_str(param.shape()));
  if (!leaf->grad) {
    // A fresh gradient nobody else holds becomes .grad as it is (as PyTorch does); anything
    // shared or strided is copied, so later in-place accumulation cannot touch another tensor.
    // The leaf's own destination (written in place by the kernel) is its .grad by design.
    bool exclusive = g.impl_ptr().use_count() == 1 && g.impl().storage.use_count() == 1;
    bool destination = leaf->grad_destination && g.impl_ptr() == leaf->grad_destination;
    leaf->grad =
        (exclusive || destination) && g.is_contiguous() ? g.impl_ptr() : g.clone_raw().impl_ptr();
  } else {
    Tensor acc(leaf->grad);
    add_into(acc, g);
  }
  for (auto& hook : leaf->grad_ready_hooks) hook(param);
  return {};
}

Tensor AccumulateGrad::take_destination(uint32_t) {
  auto leaf = leaf_.lock();
  if (!leaf || leaf->grad || !leaf->grad_destination || !leaf->grad_destination_armed) return {};
  leaf->grad_destination_armed = false;
  return Tensor(leaf->grad_destination);
}

Tensor Node::grad_buffer(size_t i, const Shape& shape, Device device) const {
  if (needs_grad(i)) {
    Tensor d = next_edges_[i].fn->take_destination(next_edges_[i].input_nr);
    if (d.defined() && d.shape() == shape && d.dtype() == DType::f32 && d.is_contiguous() &&
        d.device() == device)
      return d;
  }
  return empty(shape, DType::f32, device);
}

bool grad_enabled() {
  return t_grad_enabled;
}
NoGradGuard::NoGradGuard() : prev_(t_grad_enabled) {
  t_grad_enabled = false;
}
NoGradGuard::~NoGradGuard() {
  t_grad_enabled = prev_;
}

Edge gradient_edge(const Tensor& t) {
  TensorImpl& impl = t.impl();
  if (impl.grad_fn) return {impl.grad_fn, impl.output_nr};
  if (!impl.requires_grad) return {};
  auto acc = impl.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    impl.grad_accumulator = acc;
  }
  return {acc, 0};
}

void set_history(Tensor& out, const std::shared_ptr<Node>& node, uint32_t output_nr) {
  TensorImpl& impl = out.impl();
  impl.grad_fn = node;
  impl.output_nr = output_nr;
  impl.requires_grad = true;
}

}  // namespace cohort::autograd
