// Reducer set-up, hooks and bucket bookkeeping (protocol steps 1-2 in reducer.h). The
// collectives and the end of the pass (steps 3-4) are in reducer_comm.cc.
#include "cohort/parallel/reducer.h"

#include <cstring>

#include "cohort/autograd/engine.h"
#include "cohort/core/logging.h"

namespace cohort::parallel {
namespace {

// Rides in the queued end-of-backward callback. If the engine drops the callback (the graph or
// an earlier callback threw), the token dies unrun and tells the reducer that this pass is
// abandoned, so the next pass starts clean instead of believing it is still mid-iteration.
struct FinalizeToken {
  std::weak_ptr<Reducer> reducer;
  bool ran = false;
  ~FinalizeToken() {
    if (ran) return;
    if (auto r = reducer.lock()) r->abandon_iteration();
  }
};

}  // namespace

Reducer::Reducer(std::vector<Param> params, comm::ProcessGroup& group, DdpOptions options)
    : params_(std::move(params)), group_(group), options_(options) {
  for (const Param& p : params_) {
    COHORT_CHECK_ARG(p.tensor.dtype() == DType::f32, "DDP: parameter '", p.name, "' is ",
                     dtype_name(p.tensor.dtype()), "; DDP averages float32 parameters only");
    COHORT_CHECK_ARG(p.tensor.requires_grad() && p.tensor.is_leaf(), "DDP: parameter '", p.name,
                     "' is not a leaf that requires grad");
  }
  // Initial guess of the ready order: reverse registration (backward runs later layers first).
  std::vector<size_t> order;
  for (size_t i = params_.size(); i-- > 0;) order.push_back(i);
  build_buckets(order);
  reset_iteration();
  arm_destinations();
}

// Parameters of one module ("layers.0.weight", "layers.0.bias": the name up to its last dot)
// become ready together, from one backward node: assign_buckets keeps them in one bucket.
std::vector<int> Reducer::module_groups() const {
  std::map<std::string, int> ids;
  std::vector<int> groups;
  for (const Param& p : params_) {
    const size_t dot = p.name.rfind('.');
    const std::string module = dot == std::string::npos ? p.name : p.name.substr(0, dot);
    groups.push_back(ids.emplace(module, int(ids.size())).first->second);
  }
  return groups;
}

Reducer::~Reducer() {
  drain();
  disarm_destinations();
}

// Armed when buckets are built and after every synced step: the slot's averaged gradient is
// still the optimizer's to read, but a kernel only writes a destination once zero_grad dropped
// .grad (autograd::AccumulateGrad::take_destination), which is after the optimizer's step.
void Reducer::arm_destinations() {
  if (!options_.gradient_as_bucket_view) return;
  for (size_t p = 0; p < params_.size(); ++p) {
    TensorImpl& impl = params_[p].tensor.impl();
    impl.grad_destination = slot_view(p).impl_ptr();
    impl.grad_destination_armed = true;
  }
}

void Reducer::disarm_destinations() {
  for (Param& p : params_) {
    p.tensor.impl().grad_destination.reset();
    p.tensor.impl().grad_destination_armed = false;
  }
}

// A bucket's flat f32 buffer, from the group's shared arena where it has one: the allreduce of
// such buffers reads peers' buckets in place (two small exchanges instead of a ring of
// chunks, each of which needs both ranks' communication threads awake). Ordinary memory when
// there is no arena or it is full.
Tensor Reducer::bucket_buffer(size_t numel, bool* in_arena) {
  size_t bytes = numel * sizeof(float);
  try {
    auto shared = std::make_shared<comm::SharedBuffer>(group_.alloc_shared(bytes));
    if (*shared) {
      std::memset(shared->data(), 0, bytes);
      void* data = shared->data();
      *in_arena = true;
      return from_external(data, {int64_t(numel)}, DType::f32, std::move(shared));
    }
  } catch (const IoError& e) {
    log::warn("ddp", "gradient bucket of ", bytes, " bytes in ordinary memory: ", e.what());
  }
  return zeros({int64_t(numel)});
}

void Reducer::build_buckets(const std::vector<size_t>& order) {
  std::vector<int64_t> numels;
  for (const Param& p : params_) numels.push_back(p.tensor.numel());
  auto layouts = assign_buckets(order, numels, options_.first_bucket_bytes, options_.bucket_bytes,
                                module_groups());
  buckets_.clear();
  buckets_.resize(layouts.size());
  slots_.assign(params_.size(), Slot{});
  bool all_shared = true;
  for (size_t b = 0; b < layouts.size(); ++b) {
    bool shared = false;
    buckets_[b].flat = bucket_buffer(layouts[b].numel, &shared);
    all_shared &= shared;
    for (size_t k = 0; k < layouts[b].params.size(); ++k) slots_[layouts[b].params[k]] = {b, k};
    buckets_[b].layout = std::move(layouts[b]);
  }
  // Every rank must pass arena buffers to a bucket's allreduce, or none (the algorithm is
  // chosen from them): if any rank could not get arena memory (a full /dev/shm), all use
  // ordinary memory.
  int32_t shared = all_shared ? 1 : 0;
  group_.allreduce({.output = &shared,
                    .count = 1,
                    .dtype = comm::DType::i32,
                    .op = comm::ReduceOp::min,
                    .timeout = options_.timeout});
  if (shared == 0 && all_shared) {
    for (Bucket& b : buckets_) b.flat = zeros({int64_t(b.layout.numel)});
  }
  describe_buckets();
}

// What each bucket's comm hook is handed: fixed for a bucket assignment, so built here once
// rather than (names copied) at every launch.
void Reducer::describe_buckets() {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    bucket.view = {.index = b,
                   .num_buckets = buckets_.size(),
                   .data = static_cast<float*>(bucket.flat.raw_data()),
                   .numel = bucket.layout.numel,
                   .parameters = {},
                   .offsets = bucket.layout.offsets,
                   .shapes = {},
                   .timeout = options_.timeout};
    for (size_t p : bucket.layout.params) {
      bucket.view.parameters.push_back(params_[p].name);
      bucket.view.shapes.push_back(params_[p].tensor.shape());
    }
  }
}

void Reducer::install_hooks() {
  std::weak_ptr<Reducer> weak = weak_from_this();
  for (size_t p = 0; p < params_.size(); ++p) {
    params_[p].tensor.register_grad_ready_hook([weak, p](Tensor&) {
      if (auto self = weak.lock()) self->on_grad_ready(p);
    });
  }
}

void Reducer::detach() {
  detached_ = true;
}

void Reducer::on_grad_ready(size_t p) {
  if (detached_ || !sync_) return;  // no_sync: .grad just accumulates
  if (!in_iteration_) begin_iteration();
  mark_ready(p, params_[p].tensor.grad());
  poll_done();
}

void Reducer::begin_iteration() {
  if (needs_drain_) {
    drain();
    needs_drain_ = false;
  }
  reset_iteration();
  in_iteration_ = true;
  first_hook_ = Clock::now();
  sent0_ = group_.bytes_sent();
  received0_ = group_.bytes_received();
  auto token = std::make_shared<FinalizeToken>();
  token->reducer = weak_from_this();
  autograd::queue_callback([token] {
    token->ran = true;
    if (auto self = token->reducer.lock()) self->finalize();
  });
}

void Reducer::reset_iteration() {
  in_iteration_ = false;
  ready_.assign(params_.size(), false);
  ready_order_.clear();
  next_launch_ = 0;
  next_poll_ = 0;
  for (Bucket& b : buckets_) {
    b.pending = b.layout.params.size();
    b.work = comm::Work();
    b.observed_done = false;
  }
}

void Reducer::abandon_iteration() noexcept {
  in_iteration_ = false;
  needs_drain_ = true;
  // With bucket views .grad is bucket memory: what is in flight must land before anything
  // (the next backward's accumulation, the user's error handling) touches .grad again.
  if (options_.gradient_as_bucket_view) {
    drain();
    needs_drain_ = false;
  }
}

Tensor Reducer::slot_view(size_t p) const {
  const Slot& s = slots_[p];
  const Shape& shape = params_[p].tensor.shape();
  return buckets_[s.bucket].flat.as_strided(shape, contiguous_strides(shape),
                                            int64_t(buckets_[s.bucket].layout.offsets[s.index]));
}

// Whether `grad` already is the parameter's bucket slot `view` (gradient_as_bucket_view: set
// by an earlier step, then accumulated into in place by backward).
bool Reducer::is_slot(const Tensor& grad, const Tensor& view) {
  return grad.defined() && grad.raw_data() == view.raw_data() && grad.shape() == view.shape() &&
         grad.is_contiguous();
}

// An undefined grad (an unused parameter with find_unused_parameters) contributes zeros.
void Reducer::mark_ready(size_t p, const Tensor& grad) {
  COHORT_CHECK_ARG(!ready_[p], "DDP: the gradient of '", params_[p].name,
                   "' became ready twice in one backward pass; DDP supports one backward per "
                   "forward (reuse of a parameter is fine: its gradient is summed first)");
  Tensor view = slot_view(p);
  if (!is_slot(grad, view)) {
    if (grad.defined()) {
      view.copy_(grad);
    } else {
      view.zero_();
    }
    if (options_.gradient_as_bucket_view) params_[p].tensor.set_grad(view);
  }
  ready_[p] = true;
  ready_order_.push_back(p);
  if (--buckets_[slots_[p].bucket].pending == 0) launch_ready_buckets();
}

// Launches in index order only: a complete bucket waits for all earlier ones.
void Reducer::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    launch(next_launch_++);
  }
}

void Reducer::poll_done() {
  // Collectives complete in issue order, so only the oldest unobserved one needs a look.
  while (next_poll_ < next_launch_ && buckets_[next_poll_].work.done()) {
    buckets_[next_poll_].observed_done = true;
    buckets_[next_poll_].done_at = buckets_[next_poll_].work.finished_at().value_or(Clock::now());
    ++next_poll_;
  }
}

std::string Reducer::bucket_name(size_t b) const {
  const BucketLayout& l = buckets_[b].layout;
  std::string names;
  for (size_t k = 0; k < l.params.size() && k < 3; ++k) {
    names += (k ? ", '" : "'") + params_[l.params[k]].name + "'";
  }
  if (l.params.size() > 3) names += ", ...";
  return detail::str("DDP bucket ", b, " of ", buckets_.size(), " (", l.params.size(),
                     " parameter(s): ", names, "; ", l.numel, " floats)");
}

void Reducer::drain() noexcept {
  for (Bucket& b : buckets_) {
    if (!b.work.valid()) continue;
    // Bounded by the operations' own deadlines; never runs a comm hook's continuation (a
    // collective issued now could hang peers that are not in this pass any more), never throws:
    // the pass that launched it is failing or gone, and its error was (or will be) reported.
    b.work.wait_issued();
  }
}

}  // namespace cohort::parallel
