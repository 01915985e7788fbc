#pragma once
// The autograd graph. Each differentiable op that sees an input with requires_grad creates one
// Node, which holds what backward needs (saved tensors, shapes) and an Edge to the node that
// produced each input. Leaves that require grad are reached through an AccumulateGrad node.
//
// Rule for ops: save tensors with .detach(). A node that held its own output with grad_fn set
// would form a reference cycle output -> node -> output and never be freed.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "cohort/autograd/scope.h"
#include "cohort/tensor/tensor.h"

namespace cohort::autograd {

class Node;

struct Edge {
  std::shared_ptr<Node> fn;  // null: this input needs no gradient
  uint32_t input_nr = 0;     // which output of fn the gradient belongs to
};

class Node {
 public:
  explicit Node(uint32_t num_outputs = 1);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // grads[i] is dL/d(output i); an undefined Tensor means zero. Returns dL/d(input j) for each
  // next edge j (undefined where the input needs no gradient).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  virtual std::string name() const = 0;

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  void set_next_edges(std::vector<Edge> e) { next_edges_ = std::move(e); }
  uint32_t num_outputs() const { return num_outputs_; }
  // Whether input i needs a gradient at all; backward skips work for those that do not
  // (linear's dx for the first layer, for example).
  bool needs_grad(size_t i) const { return i < next_edges_.size() && next_edges_[i].fn; }
  // A tensor of `shape` (f32, contiguous, undefined contents) to write input i's gradient
  // into: the leaf's armed gradient destination when input i is a leaf with one (its bucket
  // slot under DDP: no copy later), else a new one. The kernel must overwrite all of it.
  Tensor grad_buffer(size_t i, const Shape& shape, Device device = Device::cpu()) const;
  // For an edge into this node's input `input_nr`: a destination for that gradient, handed out
  // at most once per arming; undefined when there is none (every node but AccumulateGrad).
  virtual Tensor take_destination(uint32_t input_nr) { return {}; }
  // Creation order; backward runs later nodes first, as PyTorch does, so parameters used last
  // in forward get their gradients first (what DDP's bucket order relies on).
  uint64_t sequence_nr() const { return sequence_nr_; }
  // The traced module whose forward created this node (scope.h); null when none was.
  const std::shared_ptr<const Scope>& scope() const { return scope_; }

 private:
  std::vector<Edge> next_edges_;
  uint32_t num_outputs_;
  uint64_t sequence_nr_;
  std::shared_ptr<const Scope> scope_;
};

// Sums incoming gradients into a leaf's .grad, then fires its grad-ready hooks.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  // The leaf's armed grad_destination while it has no .grad (disarmed as it is handed out: a
  // second use of the leaf in the same graph gets a tensor of its own, summed by the engine).
  Tensor take_destination(uint32_t input_nr) override;

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// Grad mode: thread-local, on by default. NoGradGuard turns it off for a scope.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// The edge a gradient for `t` should flow along: its grad_fn, or its AccumulateGrad when it is
// a leaf that requires grad, or an empty edge.
Edge gradient_edge(const Tensor& t);

// If grad mode is on and any input requires grad, creates NodeT(args...) with one edge per
// input (in order) and returns it; otherwise returns null and the op records nothing.
template <typename NodeT, typename... Args>
std::shared_ptr<NodeT> make_node(std::initializer_list<Tensor> inputs, Args&&... args) {
  if (!grad_enabled()) return nullptr;
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any) return nullptr;
  auto node = std::make_shared<NodeT>(std::forward<Args>(args)...);
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
  node->set_next_edges(std::move(edges));
  return node;
}
// Same, for a variable number of inputs (concat).
template <typename NodeT, typename... Args>
std::shared_ptr<NodeT> make_node_n(const std::vector<Tensor>& inputs, Args&&... args) {
  if (!grad_enabled()) return nullptr;
  bool any = false;
  for (const Tensor& t : inputs) any = any || t.requires_grad();
  if (!any) return nullptr;
  auto node = std::make_shared<NodeT>(std::forward<Args>(args)...);
  std::vector<Edge> edges;
  for (const Tensor& t : inputs) edges.push_back(gradient_edge(t));
  node->set_next_edges(std::move(edges));
  return node;
}

// Marks `out` as output `output_nr` of `node` (requires_grad = true).
void set_history(Tensor& out, const std::shared_ptr<Node>& node, uint32_t output_nr = 0);

}  // namespace cohort::autograd
