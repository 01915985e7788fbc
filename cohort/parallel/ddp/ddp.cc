#include "cohort/parallel/ddp/ddp.h"

#include <set>

#include "cohort/parallel/ddp/reducer.h"
#include "cohort/parallel/param_sync.h"

namespace cohort::parallel {
namespace {

// A tensor registered under two names (tied weights) is synchronised once, under its first.
nn::NamedTensors unique_tensors(const nn::NamedTensors& all) {
  nn::NamedTensors out;
  std::set<const TensorImpl*> seen;
  for (const auto& [name, t] : all) {
    if (seen.insert(t.impl_ptr().get()).second) out.emplace_back(name, t);
  }
  return out;
}

// Parameters and (when broadcast) buffers, buffers tagged so messages say which is which.
nn::NamedTensors structure_of(const nn::Module& m, bool with_buffers) {
  nn::NamedTensors out = m.named_parameters();
  if (with_buffers) {
    for (auto& [name, t] : m.named_buffers()) out.emplace_back("(buffer) " + name, t);
  }
  return out;
}

}  // namespace

DDP::DDP(nn::Module& module, std::shared_ptr<comm::ProcessGroup> group, DdpOptions options)
    : module_(module), group_(std::move(group)), options_(options) {
  COHORT_CHECK_ARG(group_ != nullptr, "DDP: null process group");
  COHORT_CHECK_ARG(options_.check_every >= 0, "DDP: check_every must be >= 0, got ",
                   options_.check_every);
  // Structure first: every rank decides the same way from gathered data, so a mismatch fails
  // on all ranks at once instead of leaving some waiting in a broadcast.
  verify_same_structure(*group_, structure_of(module_, options_.broadcast_buffers),
                        options_.timeout);
  params_ = unique_tensors(module_.named_parameters());
  std::vector<Reducer::Param> trained;
  for (const auto& [name, t] : params_) {
    if (t.requires_grad()) trained.push_back({name, t});
  }
  // Built before the broadcasts so that a float64 parameter fails on every rank alike.
  reducer_ = std::make_shared<Reducer>(std::move(trained), *group_, options_);
  broadcast_from_rank0(*group_, params_, options_.timeout);
  if (options_.broadcast_buffers) {
    broadcast_from_rank0(*group_, unique_tensors(module_.named_buffers()), options_.timeout);
  }
  if (options_.check_every > 0) {
    reducer_->set_after_step([this](int64_t steps) {
      if (steps % options_.check_every == 0) check_parameters_in_sync();
    });
  }
  reducer_->install_hooks();
}

DDP::~DDP() {
  reducer_->detach();
  reducer_->set_after_step(nullptr);
  reducer_->drain();
}

DDP::NoSync::NoSync(std::shared_ptr<Reducer> reducer) : reducer_(std::move(reducer)) {
  previous_ = reducer_->sync();
  reducer_->set_sync(false);
}

DDP::NoSync::NoSync(NoSync&& other) noexcept
    : reducer_(std::move(other.reducer_)), previous_(other.previous_) {}

DDP::NoSync::~NoSync() {
  if (reducer_) reducer_->set_sync(previous_);
}

DDP::NoSync DDP::no_sync() {
  return NoSync(reducer_);
}

const DdpStepStats& DDP::last_step() const {
  return reducer_->stats();
}

void DDP::set_tracer(metrics::Tracer* tracer) {
  reducer_->set_tracer(tracer);
}

size_t DDP::num_buckets() const {
  return reducer_->num_buckets();
}

void DDP::check_parameters_in_sync() {
  check_in_sync(*group_, params_, options_.timeout);
}

void DDP::register_comm_hook(std::shared_ptr<CommHook> hook) {
  COHORT_CHECK_ARG(hook != nullptr, "DDP::register_comm_hook: null hook");
  COHORT_CHECK_ARG(!hook_registered_, "DDP::register_comm_hook: a hook ('",
                   reducer_->comm_hook().name(),
                   "') is already registered; register one hook, once");
  COHORT_CHECK_ARG(reducer_->synced_steps() == 0, "DDP::register_comm_hook: register the hook ('",
                   hook->name(), "') before the first backward, not after ",
                   reducer_->synced_steps(), " synced step(s)");
  reducer_->set_comm_hook(std::move(hook));
  hook_registered_ = true;
}

CommHook& DDP::comm_hook() const {
  return reducer_->comm_hook();
}

}  // namespace cohort::parallel
