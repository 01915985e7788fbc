#include "cohort/ps/ps_strategy.h"

#include <chrono>
#include <exception>

#include "cohort/core/logging.h"

namespace cohort::ps {
namespace {

using detail::str;

void add_ps_keys(ConfigRegistry& r) {
  r.add({"ps.mode",
         ConfigType::kString,
         std::string("bsp"),
         "Parameter-server consistency: `bsp` (bulk synchronous: every step waits for every "
         "worker's push). `asp` and `ssp` (asynchronous, bounded staleness) come later.",
         "",
         {"bsp"}});
  r.add({"ps.timeout_s",
         ConfigType::kFloat,
         0.0,
         "Deadline in seconds to find and connect the parameter servers and of each push/pull "
         "(a BSP push waits for the slowest worker). 0: comm.timeout_s.",
         "",
         {},
         0.0});
}

WorkerOptions worker_options(const parallel::StrategyContext& ctx) {
  const Config& cfg = ctx.config;
  COHORT_CHECK_ARG(cfg.get_float("optim.clip_grad_norm") <= 0,
                   "parallel.strategy = 'ps' does not support optim.clip_grad_norm yet (the "
                   "global norm across servers is a later step); set it to 0");
  COHORT_CHECK_ARG(cfg.get_string("run.resume").empty(),
                   "parallel.strategy = 'ps' cannot resume yet (run.resume = '",
                   cfg.get_string("run.resume"),
                   "'): the servers' state is not checkpointed in this version");
  const rendezvous::EnvMap empty_env;
  const rendezvous::EnvMap& env = ctx.env ? *ctx.env : empty_env;
  WorkerOptions o;
  o.num_servers = rendezvous::int_from_env(env, "COHORT_NUM_SERVERS", 0);
  COHORT_CHECK_ARG(o.num_servers > 0 && ctx.store != nullptr,
                   "parallel.strategy = 'ps' needs parameter servers: start the job with "
                   "`cohort train CONFIG --workers N --servers S` (or `cohort run --servers S`)");
  o.rank = ctx.group ? ctx.group->rank() : 0;
  o.num_workers = ctx.group ? ctx.group->size() : 1;
  o.store = ctx.store;
  o.secret = rendezvous::secret_from_env(env, rendezvous::SecretPolicy::kAllowInsecure);
  o.secret_policy = rendezvous::SecretPolicy::kAllowInsecure;
  double t = cfg.get_float("ps.timeout_s");
  if (t <= 0) t = cfg.get_float("comm.timeout_s");
  o.timeout = Millis(int64_t(t * 1000.0));
  o.total_steps = ctx.total_steps;
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

PsStrategy::PsStrategy(const parallel::StrategyContext& ctx, WorkerOptions options)
    : Strategy(ctx), params_(ctx.model.named_parameters()), layout_(layout_of(params_)) {
  worker_ = std::make_unique<PsWorker>(std::move(options), layout_);
  grads_.resize(size_t(layout_.total));
  values_.resize(size_t(layout_.total));
  worker_->pull(values_.data());  // start from the servers' parameters
  scatter_values(params_, layout_, {0, layout_.total}, values_.data());
}

double PsStrategy::clip_grad_norm(double) {
  throw InvalidArgument(
      "parallel.strategy = 'ps' does not support clip_grad_norm yet (the global norm across "
      "servers is a later step)");
}

void PsStrategy::step() {
  const auto t0 = std::chrono::steady_clock::now();
  gather_grads(params_, layout_, {0, layout_.total}, grads_.data());
  TransferStats t = worker_->push_pull(step_, grads_.data(), values_.data());
  scatter_values(params_, layout_, {0, layout_.total}, values_.data());
  ++step_;
  const double s = seconds_since(t0);
  stats_ = {
      .comm_s = s, .exposed_s = s, .bytes_sent = t.bytes_sent, .bytes_received = t.bytes_received};
}

void PsStrategy::shutdown() noexcept {
  if (!worker_) return;
  // Called from the trainer's destructor: while an exception unwinds, this worker is failing,
  // and the servers should say so rather than count it as finished.
  if (std::uncaught_exceptions() > 0) {
    worker_->abandon();
  } else {
    worker_->bye();
  }
}

parallel::StrategyRegistration ps_strategy_registration() {
  return {.name = "ps",
          .description =
              "parameter servers (--servers S): workers push gradients, servers "
              "update and serve parameters; BSP for now, ASP/SSP later",
          .add_keys = add_ps_keys,
          .make = [](const parallel::StrategyContext& ctx) -> std::unique_ptr<parallel::Strategy> {
            return std::make_unique<PsStrategy>(ctx, worker_options(ctx));
          }};
}

}  // namespace cohort::ps
