// Reducer set-up, hooks and bucket bookkeeping (protocol steps 1-2 in reducer.h). The
// collectives and the end of the pass (steps 3-4) are in reducer_comm.cc.
#include "cohort/parallel/ddp/reducer.h"

#include <cstring>

#include "cohort/core/logging.h"

namespace cohort::parallel {
Reducer::Reducer(std::vector<Param> params, comm::ProcessGroup& group, DdpOptions options)
    : params_(std::move(params)),
      group_(group),
      options_(options),
      engine_(std::make_shared<GradBucketing>(GradBucketing::Order::fixed,
                                              GradBucketing::Start::first_hook, policy())) {
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
  arm_destinations();
}

// DDP as a policy on the bucketing engine: hooks and the order of launches are the engine's.
GradBucketing::Policy Reducer::policy() {
  return {.take = [this](size_t p) { take_grad(p); },
          .launch = [this](size_t b) { return launch(b); },
          .begin = [this] { begin_iteration(); },
          .after_hook = [this] { engine_->poll([this](size_t b) { observe_done(b); }); },
          .end_of_backward = [this] { finalize(); },
          .abandoned = [this] { on_abandoned(); },
          .ready_twice =
              [this](size_t p) {
                COHORT_CHECK_ARG(false, "DDP: the gradient of '", params_[p].name,
                                 "' became ready twice in one backward pass; DDP supports one "
                                 "backward per forward (reuse of a parameter is fine: its gradient "
                                 "is summed first)");
              }};
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
  engine_->drain();
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
  std::vector<std::vector<size_t>> bucket_of(params_.size());
  bool all_shared = true;
  for (size_t b = 0; b < layouts.size(); ++b) {
    bool shared = false;
    buckets_[b].flat = bucket_buffer(layouts[b].numel, &shared);
    all_shared &= shared;
    for (size_t k = 0; k < layouts[b].params.size(); ++k) {
      slots_[layouts[b].params[k]] = {b, k};
      bucket_of[layouts[b].params[k]] = {b};
    }
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
  engine_->set_plan(ReadyCounter(std::move(bucket_of), buckets_.size()));
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
  std::vector<Tensor> tensors;
  for (const Param& p : params_) tensors.push_back(p.tensor);
  engine_->install(tensors);
}

// The first hook of a synced pass (the engine drained an abandoned pass and reset before).
void Reducer::begin_iteration() {
  first_hook_ = Clock::now();
  sent0_ = group_.bytes_sent();
  received0_ = group_.bytes_received();
}

void Reducer::on_abandoned() {
  // With bucket views .grad is bucket memory: what is in flight must land before anything
  // (the next backward's accumulation, the user's error handling) touches .grad again.
  if (options_.gradient_as_bucket_view) engine_->drain();
}

Tensor Reducer::slot_view(size_t p) const {
  const Slot& s = slots_[p];
  const Shape& shape = params_[p].tensor.shape();
  return buckets_[s.bucket].flat.as_strided(shape, contiguous_strides(shape),
                                            int64_t(buckets_[s.bucket].layout.offsets[s.index]));
}

// An undefined grad (an unused parameter with find_unused_parameters) contributes zeros.
void Reducer::take_grad(size_t p) {
  const Tensor& grad = params_[p].tensor.grad();
  Tensor view = slot_view(p);
  if (is_bucket_slot(grad, view)) return;
  if (grad.defined()) {
    view.copy_(grad);
  } else {
    view.zero_();
  }
  if (options_.gradient_as_bucket_view) params_[p].tensor.set_grad(view);
}

// Seen done at a later hook or in the end-of-backward wait: its own end time where known.
void Reducer::observe_done(size_t b) {
  const comm::Work& work = engine_->work(b);
  buckets_[b].done_at = work.finished_at().value_or(Clock::now());
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

}  // namespace cohort::parallel
