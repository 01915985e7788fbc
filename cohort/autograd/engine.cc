#include "cohort/autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "cohort/dispatch/kernel_table.h"

namespace cohort::autograd {

Tensor add_raw(const Tensor& a, const Tensor& b) {
  Tensor out = a.clone_raw();
  add_into(out, b);
  return out;
}

void add_into(Tensor& acc, const Tensor& g) {
  COHORT_INTERNAL(acc.numel() == g.numel() && acc.is_contiguous(), "add_into: bad accumulator");
  Tensor gc = g.contiguous_raw();
  float* a = acc.data<float>();
  const float* b = gc.data<float>();
  int64_t n = acc.numel();
  if (const Device d = acc.device(); !d.is_cpu()) {  // in place on the device: a = a + b
    dispatch::common_device("backward (gradient sum)", {&acc, &gc});
    dispatch::kernels_for(d).binary_2d(d, cpu::BinaryOp::kAdd, 1, n, a, 0, 1, b, 0, 1, a);
    return;
  }
  for (int64_t i = 0; i < n; ++i) a[i] += b[i];
}

namespace {

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const {
    return a->sequence_nr() < b->sequence_nr();
  }
};

// Number of incoming edges for each node reachable from root.
std::unordered_map<Node*, int> count_dependencies(Node* root) {
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack{root};
  std::unordered_map<Node*, bool> seen{{root, true}};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.fn) continue;
      deps[e.fn.get()]++;
      if (!seen[e.fn.get()]) {
        seen[e.fn.get()] = true;
        stack.push_back(e.fn.get());
      }
    }
  }
  return deps;
}

// The callback queue of the innermost backward() on this thread (null outside backward).
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;

// Installs a fresh queue for one backward() and restores the enclosing one on exit, so an
// exception anywhere leaves no stale queue behind.
class CallbackScope {
 public:
  CallbackScope() : prev_(t_callbacks) { t_callbacks = &queue_; }
  ~CallbackScope() { t_callbacks = prev_; }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

  // Runs callbacks in order, including ones queued by callbacks. On a throw the queue is
  // cleared (nothing else runs) and the exception propagates.
  void run_all() {
    for (size_t i = 0; i < queue_.size(); ++i) {
      std::function<void()> fn = std::move(queue_[i]);  // fn may grow queue_
      try {
        fn();
      } catch (...) {
        queue_.clear();
        throw;
      }
    }
    queue_.clear();
  }

 private:
  std::vector<std::function<void()>> queue_;
  std::vector<std::function<void()>>* prev_;
};

void accumulate(std::vector<Tensor>& slot_list, uint32_t slot, Tensor g) {
  Tensor& s = slot_list[slot];
  if (!s.defined()) {
    s = std::move(g);
  } else {
    s = add_raw(s, g);
  }
}

// Runs the graph from `start` with `seed` as the gradient of its output (steps 2-3 above).
void run_graph(const Edge& start, const Tensor& seed) {
  auto deps = count_dependencies(start.fn.get());
  std::unordered_map<Node*, std::vector<Tensor>> inputs;
  std::unordered_map<Node*, std::shared_ptr<Node>> keep_alive;
  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
  inputs[start.fn.get()].resize(start.fn->num_outputs());
  accumulate(inputs[start.fn.get()], start.input_nr, seed);
  ready.push(start.fn.get());
  keep_alive[start.fn.get()] = start.fn;
  ScopeTracker scopes;  // backward spans per traced module (scope.h)
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    scopes.enter(node->scope());
    std::vector<Tensor> in = std::move(inputs[node]);
    bool any = false;
    for (const Tensor& g : in) any = any || g.defined();
    // A node whose outputs all got no gradient passes none on; ops may assume grads[0] is
    // defined when they have one output.
    std::vector<Tensor> grads = any ? node->apply(std::move(in)) : std::vector<Tensor>{};
    inputs.erase(node);
    const auto& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.fn) continue;
      Node* next = e.fn.get();
      auto& buf = inputs[next];
      if (buf.empty()) buf.resize(next->num_outputs());
      if (i < grads.size() && grads[i].defined()) accumulate(buf, e.input_nr, grads[i]);
      keep_alive.emplace(next, e.fn);
      if (--deps[next] == 0) ready.push(next);
    }
  }
  scopes.leave_all();  // before the end-of-backward callbacks (DDP's wait) run
}

}  // namespace

void queue_callback(std::function<void()> fn) {
  COHORT_CHECK_ARG(t_callbacks != nullptr,
                   "queue_callback: no backward() is running on this thread (call it from a "
                   "grad-ready hook or another backward function)");
  COHORT_CHECK_ARG(fn != nullptr, "queue_callback: empty callback");
  t_callbacks->push_back(std::move(fn));
}

void backward(const Tensor& root, const Tensor& grad_output) {
  COHORT_CHECK_ARG(root.requires_grad(),
                   "backward: the tensor does not require grad and has no grad_fn");
  Tensor seed = grad_output;
  if (!seed.defined()) {
    COHORT_CHECK_ARG(root.numel() == 1,
                     "backward: grad can be implied only for a tensor with one "
                     "element, got shape ",
                     shape_str(root.shape()));
    seed = ones(root.shape(), DType::f32, root.device());
  }
  COHORT_CHECK_ARG(seed.shape() == root.shape(), "backward: grad_output shape ",
                   shape_str(seed.shape()), " does not match ", shape_str(root.shape()));
  NoGradGuard no_grad;  // backward functions must not record a graph
  CallbackScope callbacks;
  run_graph(gradient_edge(root), seed);
  callbacks.run_all();
}

}  // namespace cohort::autograd

namespace cohort {
void Tensor::backward(const Tensor& grad_output) const {
  autograd::backward(*this, grad_output);
}
}  // namespace cohort
