#include "cohort/parallel/tensor/tp_ops.h"

#include "cohort/autograd/node.h"
#include "cohort/core/error.h"

namespace cohort::parallel {
namespace {

void check_input(const Tensor& x, const GroupPtr& group, const char* op) {
  COHORT_CHECK_ARG(group != nullptr, op, ": the tensor-parallel group is null");
  COHORT_CHECK_ARG(x.defined() && x.dtype() == DType::f32, op, ": input must be float32, got ",
                   x.defined() ? dtype_name(x.dtype()) : "an undefined tensor");
}

// An undefined gradient means zero; a collective in backward still needs a buffer on every
// rank, or the ranks' collective sequences would differ.
Tensor grad_or_zeros(const Tensor& g, const Shape& shape) {
  return g.defined() ? g : zeros(shape);
}

struct CopyToGroupBackward : autograd::Node {
  GroupPtr group;
  Shape shape;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grad_or_zeros(grads[0], shape).clone_raw();
    allreduce_(g, *group, comm::ReduceOp::sum);
    return {g};
  }
  std::string name() const override { return "CopyToGroupBackward"; }
};

struct ReduceFromGroupBackward : autograd::Node {
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {grads[0]}; }
  std::string name() const override { return "ReduceFromGroupBackward"; }
};

struct GatherFromGroupBackward : autograd::Node {
  Shape shape;  // the input's: the gradient is this rank's block of columns
  int64_t rank = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    const int64_t n = shape.back();
    return {grads[0].detach().slice(-1, rank * n, (rank + 1) * n).contiguous_raw()};
  }
  std::string name() const override { return "GatherFromGroupBackward"; }
};

}  // namespace

void allreduce_(Tensor& t, comm::ProcessGroup& group, comm::ReduceOp op) {
  COHORT_CHECK_ARG(t.is_contiguous() && t.dtype() == DType::f32,
                   "allreduce_: needs a contiguous float32 tensor, got ", shape_str(t.shape()));
  if (group.size() == 1 || t.numel() == 0) return;
  group.allreduce({.output = t.data<float>(), .count = size_t(t.numel()), .op = op});
}

Tensor allgather_last_dim(const Tensor& x, comm::ProcessGroup& group) {
  const int64_t c = group.size();
  if (c == 1) return x.contiguous_raw();
  COHORT_CHECK_ARG(x.dim() >= 1, "gather_from_group: input must have a last dimension, got ",
                   shape_str(x.shape()));
  Tensor in = x.contiguous_raw();
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  Tensor buf = empty({c, rows, n});  // rank k's block at k
  if (x.numel() > 0)
    group.allgather(
        {.input = in.data<float>(), .output = buf.data<float>(), .count = size_t(x.numel())});
  Shape out_shape = x.shape();
  out_shape.back() = c * n;
  // [c, rows, n] -> [rows, c, n]: each row's blocks side by side in rank order.
  return buf.as_strided({rows, c, n}, {n, rows * n, 1}, 0).clone_raw().reshape(out_shape);
}

Tensor copy_to_group(const Tensor& x, const GroupPtr& group) {
  check_input(x, group, "copy_to_group");
  Tensor out = x.detach();
  if (auto node = autograd::make_node<CopyToGroupBackward>({x})) {
    node->group = group;
    node->shape = x.shape();
    autograd::set_history(out, node);
  }
  return out;
}

Tensor reduce_from_group(const Tensor& x, const GroupPtr& group) {
  check_input(x, group, "reduce_from_group");
  Tensor out = x.clone_raw();  // summed in place: never into x's storage
  allreduce_(out, *group, comm::ReduceOp::sum);
  if (auto node = autograd::make_node<ReduceFromGroupBackward>({x}))
    autograd::set_history(out, node);
  return out;
}

Tensor gather_from_group(const Tensor& x, const GroupPtr& group) {
  check_input(x, group, "gather_from_group");
  Tensor out = allgather_last_dim(x, *group);
  if (group->size() == 1) out = x.clone_raw();  // a fresh tensor to carry the history
  if (auto node = autograd::make_node<GatherFromGroupBackward>({x})) {
    node->shape = x.shape();
    node->rank = group->rank();
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace cohort::parallel
