// The "local_sgd" strategy: local SGD and post-local SGD (local_sgd_strategy.h), with its keys.
#include "cohort/parallel/decentralized/local_sgd_strategy.h"

#include <cstdio>
#include <set>

#include "cohort/parallel/builtin_strategies.h"
#include "cohort/parallel/param_sync.h"

namespace cohort::parallel {
namespace {

void add_local_sgd_keys(ConfigRegistry& r) {
  r.add({"local_sgd.period",
         ConfigType::kInt,
         int64_t(4),
         "H: after the warm-up, the ranks step alone and average their parameters (one "
         "allreduce) every H optimizer steps. 1: every step (like ddp, averaging parameters "
         "instead of gradients).",
         "",
         {},
         1.0});
  r.add({"local_sgd.warmup_steps",
         ConfigType::kInt,
         int64_t(0),
         "W: post-local SGD (Lin et al. 2020): the first W steps are synchronous data parallel "
         "(gradients averaged every step), local steps after. 0: local SGD from the start.",
         "",
         {},
         0.0});
  r.add({"local_sgd.average_optimizer_state", ConfigType::kBool, false,
         "Also average the optimizer state (momentum, Adam moments) at every parameter average. "
         "false: each rank keeps its own between averages (checkpoints average it anyway)."});
  r.add({"local_sgd.report_params_hash", ConfigType::kBool, false,
         "Debug: in each logged step record where the ranks' parameters agree (warm-up, right "
         "after an average) a hash of them, local_sgd_params_hash, to compare across the "
         "ranks' metrics files. Costs a pass over the parameters per logged step."});
}

// Each distinct tensor once (tied weights are registered under two names).
std::vector<Tensor> distinct(const nn::NamedTensors& all, bool floats_only) {
  std::vector<Tensor> out;
  std::set<const TensorImpl*> seen;
  for (const auto& [name, t] : all) {
    if (floats_only && t.dtype() != DType::f32) continue;
    if (seen.insert(t.impl_ptr().get()).second) out.push_back(t);
  }
  return out;
}

// Parameters and buffers, buffers tagged so that structure errors say which is which.
nn::NamedTensors structure_of(const nn::Module& m) {
  nn::NamedTensors out = m.named_parameters();
  for (auto& [name, t] : m.named_buffers()) out.emplace_back("(buffer) " + name, t);
  return out;
}

std::string hex(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

}  // namespace

LocalSgdOptions local_sgd_options_from(const Config& cfg) {
  LocalSgdOptions o;
  o.period = cfg.get_int("local_sgd.period");
  o.warmup_steps = cfg.get_int("local_sgd.warmup_steps");
  o.average_optimizer_state = cfg.get_bool("local_sgd.average_optimizer_state");
  o.report_params_hash = cfg.get_bool("local_sgd.report_params_hash");
  // The registry's ranges check config files; these check options built by hand.
  COHORT_CHECK_ARG(o.period >= 1, "local_sgd.period must be >= 1, got ", o.period);
  COHORT_CHECK_ARG(o.warmup_steps >= 0, "local_sgd.warmup_steps must be >= 0, got ",
                   o.warmup_steps);
  return o;
}

LocalSgdStrategy::LocalSgdStrategy(const StrategyContext& ctx, LocalSgdOptions options)
    : Strategy(ctx),
      ReplicatedCheckpoint(ctx),
      options_(options),
      replica_averager_(*ctx.group, "local_sgd parameters", options.timeout),
      grad_averager_(*ctx.group, "local_sgd gradients", options.timeout),
      optimizer_averager_(*ctx.group, "local_sgd optimizer state", options.timeout) {
  COHORT_CHECK_ARG(options_.period >= 1, "local_sgd.period must be >= 1, got ", options_.period);
  COHORT_CHECK_ARG(options_.warmup_steps >= 0, "local_sgd.warmup_steps must be >= 0, got ",
                   options_.warmup_steps);
  // Structure first, decided from gathered data: a mismatch fails on every rank at once.
  verify_same_structure(*group_, structure_of(model_), options_.timeout);
  nn::NamedTensors params = model_.named_parameters();
  broadcast_from_rank0(*group_, params, options_.timeout);
  broadcast_from_rank0(*group_, model_.named_buffers(), options_.timeout);
  for (const Tensor& p : distinct(params, false)) {
    COHORT_CHECK_ARG(p.dtype() == DType::f32, "local_sgd: parameters must be float32, got ",
                     p.str());
    if (p.requires_grad()) params_.push_back(p);
  }
  replica_ = params_;
  for (const Tensor& b : distinct(model_.named_buffers(), true)) replica_.push_back(b);
}

bool LocalSgdStrategy::ends_period(int64_t step) const {
  return step > options_.warmup_steps && (step - options_.warmup_steps) % options_.period == 0;
}

void LocalSgdStrategy::backward(const Tensor& loss, bool sync) {
  loss.backward();
  if (sync && in_warmup()) average_gradients();
}

// As ddp with find_unused_parameters: a parameter that got no gradient on this rank counts as
// a zero gradient (every rank must contribute to the one allreduce).
void LocalSgdStrategy::average_gradients() {
  std::vector<Tensor> grads;
  for (Tensor& p : params_) {
    if (!p.grad().defined()) p.set_grad(zeros_like(p));
    grads.push_back(p.grad());
  }
  pending_ += grad_averager_.average(grads);
}

void LocalSgdStrategy::average_parameters() {
  pending_ += replica_averager_.average(replica_);
  replicas_averaged_at_ = synced_at_ = steps_;
  ++interval_.averages;
  ++run_.averages;
}

// Through the optimizer's state export (copies), reduced as one list, imported back.
void LocalSgdStrategy::average_optimizer_state() {
  optim::OptimizerState st = optimizer_.export_state();
  std::vector<Tensor> slots;
  for (auto& [name, t] : st.tensors) {
    if (t.dtype() == DType::f32) slots.push_back(t);
  }
  pending_ += optimizer_averager_.average(slots);
  optimizer_.import_state(st);
  optimizer_averaged_at_ = steps_;
}

void LocalSgdStrategy::step() {
  bool synced = in_warmup();  // the gradients were averaged: the replicas stay equal
  optimizer_.step();
  ++steps_;
  if (synced) synced_at_ = steps_;
  if (ends_period(steps_)) {
    average_parameters();
    if (options_.average_optimizer_state) average_optimizer_state();
  }
  account(pending_);
  pending_ = {};
}

void LocalSgdStrategy::account(const FlatAverageStats& s) {
  last_ = {.comm_s = s.seconds,
           .exposed_s = s.seconds,  // the averages block the step: nothing overlaps them
           .bytes_sent = s.bytes_sent,
           .bytes_received = s.bytes_received};
  for (Totals* t : {&interval_, &run_}) {
    ++t->steps;
    t->bytes_sent += s.bytes_sent;
    t->comm_s += s.seconds;
  }
}

void LocalSgdStrategy::prepare_checkpoint() {
  if (replicas_averaged_at_ != steps_) average_parameters();
  if (optimizer_averaged_at_ != steps_) average_optimizer_state();
  synced_at_ = steps_;
  // Counted with the next step's communication.
}

StrategyStats LocalSgdStrategy::last_stats() const {
  return last_;
}

nlohmann::json LocalSgdStrategy::take_interval_metrics() {
  nlohmann::json j{
      {"local_sgd_phase", steps_ <= options_.warmup_steps ? "warmup" : "local"},
      {"local_sgd_steps_since_average", steps_since_average()},
      {"local_sgd_averages", interval_.averages},
      {"local_sgd_bytes_per_step",
       interval_.steps ? double(interval_.bytes_sent) / double(interval_.steps) : 0.0}};
  if (options_.report_params_hash && steps_since_average() == 0) {
    std::vector<float> v = pack_values(params_);
    j["local_sgd_params_hash"] = hex(hash_bytes(v.data(), v.size() * sizeof(float)));
  }
  interval_ = {};
  return j;
}

nlohmann::json LocalSgdStrategy::summary_metrics() const {
  return {{"local_sgd_period", options_.period},
          {"local_sgd_warmup_steps", options_.warmup_steps},
          {"local_sgd_averages", run_.averages},
          {"local_sgd_bytes_per_step",
           run_.steps ? double(run_.bytes_sent) / double(run_.steps) : 0.0}};
}

StrategyState LocalSgdStrategy::state() const {
  StrategyState st;
  st.values = {{"steps", steps_}};
  return st;
}

// A checkpoint is written right after prepare_checkpoint(): the ranks agreed at that step.
void LocalSgdStrategy::load_state(const StrategyState& state) {
  COHORT_CHECK_ARG(state.values.contains("steps") && state.values["steps"].is_number_integer(),
                   "local_sgd: the checkpoint's strategy state has no integer 'steps' (got ",
                   state.values.dump(), ")");
  steps_ = state.values["steps"].get<int64_t>();
  synced_at_ = replicas_averaged_at_ = optimizer_averaged_at_ = steps_;
}

StrategyRegistration local_sgd_strategy_registration() {
  return {.name = "local_sgd",
          .description =
              "local SGD: ranks step alone, parameters averaged every "
              "local_sgd.period steps (after local_sgd.warmup_steps synchronous ones)",
          .add_keys = add_local_sgd_keys,
          .make = [](const StrategyContext& ctx) -> std::unique_ptr<Strategy> {
            LocalSgdOptions o = local_sgd_options_from(ctx.config);
            if (ctx.group == nullptr) return make_none_strategy(ctx);  // a job of one
            return std::make_unique<LocalSgdStrategy>(ctx, o);
          }};
}

}  // namespace cohort::parallel
