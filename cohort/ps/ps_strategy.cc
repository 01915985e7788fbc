#include "cohort/ps/ps_strategy.h"
#include "cohort/core/clock.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "cohort/core/logging.h"
#include "cohort/optim/clip.h"

namespace cohort::ps {
namespace {

using detail::str;

void add_ps_keys(ConfigRegistry& r) {
  r.add({"ps.mode",
         ConfigType::kString,
         std::string("bsp"),
         "Parameter-server consistency: `bsp` (bulk synchronous: every step waits for every "
         "worker's push), `asp` (asynchronous: each push is applied on arrival and answered at "
         "once), `ssp` (stale synchronous: as asp, but no worker runs more than ps.staleness "
         "steps ahead of the slowest).",
         "",
         {"bsp", "asp", "ssp"}});
  r.add({"ps.staleness",
         ConfigType::kInt,
         int64_t(3),
         "SSP: how many steps a worker may run ahead of the slowest; the server holds a faster "
         "worker's pull until the slowest catches up. Only with ps.mode = 'ssp'.",
         "",
         {},
         0.0});
  r.add({"ps.staleness_lr", ConfigType::kBool, false,
         "ASP/SSP: scale each push's update by 1/max(1, staleness), staleness = the server "
         "updates applied since that worker last received the parameters (Zhang et al., 2016)."});
  r.add({"ps.backup_workers",
         ConfigType::kInt,
         int64_t(0),
         "BSP: each step is applied once N - b workers pushed it (the first N - b to arrive); "
         "later pushes of that step are dropped (counted in metrics). Must be < N.",
         "",
         {},
         0.0});
  r.add({"fault.kill_server",
         ConfigType::kInt,
         int64_t(-1),
         "Fault injection (tests): the parameter server that kills itself with SIGKILL once its "
         "step reaches fault.kill_server_at_step, on its first start only; -1: none.",
         "",
         {},
         -1.0});
  r.add({"fault.kill_server_at_step",
         ConfigType::kInt,
         int64_t(0),
         "Fault injection: the step at which fault.kill_server dies (after that step's update "
         "and any due checkpoint, before answering the pushes).",
         "",
         {},
         0.0});
  r.add({"ps.server_metrics_every",
         ConfigType::kInt,
         int64_t(100),
         "Parameter servers: a `server_interval` record (updates/s, bytes in/out, queue depth) "
         "in metrics.server<i>.jsonl every this many optimizer updates of that server; 0: only "
         "the final `server_summary`.",
         "",
         {},
         0.0});
  r.add({"ps.timeout_s",
         ConfigType::kFloat,
         0.0,
         "Deadline in seconds to find and connect the parameter servers and of each push/pull "
         "(a BSP push waits for the slowest worker). 0: comm.timeout_s.",
         "",
         {},
         0.0});
  r.add({"ps.overlap", ConfigType::kBool, true,
         "Push each server's key range as soon as backward has every gradient in it (the last "
         "layers' servers first), so round trips run while backward computes the rest; step() "
         "waits for the answers. Off with optim.clip_grad_norm > 0 (the push waits for the "
         "clip). false: every push starts in step(). Same bytes either way (docs/ps.md)."});
  r.add({"ps.shared_memory", ConfigType::kBool, true,
         "Workers and servers on one host move pushes and answers through the worker's "
         "shared-memory area (each server reads and writes its key range's slice; the socket "
         "carries headers only); other links, and compressed pushes, use the socket. false: "
         "always the socket (docs/ps.md, \"Same-host pushes\")."});
  add_push_compression_keys(r);
}

// ps.overlap, unless worker-side clipping needs every gradient before any push. A key that
// is not declared (a registry without the trainer's keys) reads as its default.
bool overlap_from_config(const Config& cfg, int rank) {
  const ConfigRegistry& r = cfg.registry();
  if (r.find("ps.overlap") != nullptr && !cfg.get_bool("ps.overlap")) return false;
  if (r.find("optim.clip_grad_norm") == nullptr || cfg.get_float("optim.clip_grad_norm") <= 0)
    return true;
  if (rank == 0)
    log::info("ps",
              "ps.overlap: optim.clip_grad_norm > 0 needs every gradient before any "
              "push, so the pushes start in step()");
  return false;
}

WorkerOptions worker_options(const parallel::StrategyContext& ctx) {
  const Config& cfg = ctx.config;
  const bool resuming = resumes_job(cfg);
  COHORT_CHECK_ARG(cfg.get_float("train.time_limit_s") <= 0,
                   "parallel.strategy = 'ps' does not support train.time_limit_s yet (each worker "
                   "would stop at its own step; BSP's servers would wait for the stopped ones)");
  const rendezvous::EnvMap empty_env;
  const rendezvous::EnvMap& env = ctx.env ? *ctx.env : empty_env;
  WorkerOptions o;
  o.num_servers = rendezvous::int_from_env(env, "COHORT_NUM_SERVERS", 0);
  COHORT_CHECK_ARG(o.num_servers > 0 && ctx.store != nullptr,
                   "parallel.strategy = 'ps' needs parameter servers: start the job with "
                   "`cohort train CONFIG --workers N --servers S` (or `cohort run --servers S`)");
  o.rank = ctx.rank;
  o.num_workers = ctx.world_size;
  o.rejoin = ctx.restarts_alone > 0 || resuming;    // both start where the servers are
  o.resumed = resuming && ctx.restarts_alone == 0;  // the job's start, not a later rejoin
  o.store = ctx.store;
  o.secret = rendezvous::secret_from_env(env, net::SecretPolicy::kAllowInsecure);
  o.secret_policy = net::SecretPolicy::kAllowInsecure;
  double t = cfg.get_float("ps.timeout_s");
  if (t <= 0) t = cfg.get_float("comm.timeout_s");
  o.timeout = Millis(int64_t(t * 1000.0));
  o.total_steps = ctx.total_steps;
  o.consistency = consistency_from_config(cfg, o.num_workers);
  o.compression = push_compression_from_config(cfg);
  o.shared_memory = shared_memory_from_config(cfg);
  return o;
}

// The staleness histogram's buckets: 0 .. kHistBuckets-2, and "kHistBuckets-1 or more".
constexpr size_t kHistBuckets = 9;

}  // namespace

bool resumes_job(const Config& cfg) {
  const std::string resume = cfg.get_string("run.resume");
  COHORT_CHECK_ARG(resume.empty() || resume == "auto", "run.resume = '", resume,
                   "': a parameter-server job resumes with 'auto' (each server restores its "
                   "newest checkpoint in its own directory, <checkpoints>/server-<i>; the "
                   "workers go on where the servers are)");
  return resume == "auto";
}

bool shared_memory_from_config(const Config& cfg) {
  return cfg.registry().find("ps.shared_memory") == nullptr || cfg.get_bool("ps.shared_memory");
}

Consistency consistency_from_config(const Config& cfg, int num_workers) {
  Consistency c;
  c.mode = parse_mode(cfg.get_string("ps.mode"));
  const std::string mode = cfg.get_string("ps.mode");
  c.staleness = cfg.get_int("ps.staleness");
  COHORT_CHECK_ARG(c.staleness >= 0, "ps.staleness = ", c.staleness, " must be >= 0");
  COHORT_CHECK_ARG(c.mode == Mode::kSsp || !cfg.is_set("ps.staleness"), "ps.staleness is set (",
                   c.staleness, ") but ps.mode = '", mode, "'; it bounds 'ssp' only");
  c.staleness_lr = cfg.get_bool("ps.staleness_lr");
  COHORT_CHECK_ARG(c.mode != Mode::kBsp || !c.staleness_lr,
                   "ps.staleness_lr applies to ps.mode = 'asp' or 'ssp' (BSP's pushes are not "
                   "stale), ps.mode = '",
                   mode, "'");
  c.backup_workers = int(cfg.get_int("ps.backup_workers"));
  COHORT_CHECK_ARG(c.backup_workers == 0 || c.mode == Mode::kBsp,
                   "ps.backup_workers = ", c.backup_workers,
                   " applies to ps.mode = 'bsp' only, ps.mode = '", mode, "'");
  COHORT_CHECK_ARG(c.backup_workers >= 0 && c.backup_workers < num_workers,
                   "ps.backup_workers = ", c.backup_workers, " must be less than the ", num_workers,
                   " workers (each step needs at least one push)");
  return c;
}

void PsMetrics::add(const PushReply& r) {
  ++pushes;
  staleness_max = std::max<int64_t>(staleness_max, r.staleness);
  staleness_sum += r.staleness;
  lead_max = std::max<int64_t>(lead_max, r.lead);
  blocked_s += r.held_s;
  dropped += r.dropped;
  if (hist.empty()) hist.assign(kHistBuckets, 0);
  ++hist[std::min<size_t>(size_t(std::max(0, r.staleness)), kHistBuckets - 1)];
}

void PsMetrics::add_transfer(const TransferStats& t, double seconds, Transfer kind) {
  if (kind == Transfer::kPushPull) {
    push_bytes += t.bytes_sent;
    push_pull_s += seconds;
    raw_push_bytes += t.raw_bytes;
    encode_s += t.encode_s;
  } else {
    pull_s += seconds;
  }
  pull_bytes += t.bytes_received;
}

void PsMetrics::add_overlap(const OverlapStep& o) {
  pushes_in_backward += o.pushes_in_backward;
  push_overlap_s += o.hidden_s;
}

nlohmann::json PsMetrics::json(bool with_hist) const {
  const double n = double(std::max<int64_t>(pushes, 1));
  nlohmann::json j{{"staleness_max", staleness_max},
                   {"staleness_mean", staleness_sum / n},
                   {"lead_max", lead_max},
                   {"ssp_blocked_ms", 1e3 * blocked_s / n},
                   {"ssp_blocked_s", blocked_s},
                   {"dropped_pushes", dropped},
                   {"push_bytes", push_bytes},
                   {"pull_bytes", pull_bytes},
                   {"push_pull_s", push_pull_s},
                   {"pull_s", pull_s},
                   {"pushes_in_backward", pushes_in_backward},
                   {"push_overlap_s", push_overlap_s}};
  if (raw_push_bytes > 0) {  // compressed pushes: per step, as the DDP hook's compress_* fields
    j["compress_raw_bytes"] = double(raw_push_bytes) / n;
    j["compress_message_bytes"] = double(push_bytes) / n;
    j["compress_ratio"] = push_bytes > 0 ? double(raw_push_bytes) / double(push_bytes) : 0.0;
    j["compress_encode_ms"] = 1e3 * encode_s / n;  // per push (over the servers)
  }
  if (with_hist) {
    nlohmann::json h = nlohmann::json::object();
    for (size_t i = 0; i < hist.size(); ++i)
      h[i + 1 == hist.size() ? str(i, "+") : std::to_string(i)] = hist[i];
    j["staleness_hist"] = h;
  }
  return j;
}

PsStrategy::PsStrategy(const parallel::StrategyContext& ctx, WorkerOptions options)
    : Strategy(ctx), params_(ctx.model.named_parameters()), layout_(layout_of(params_)) {
  mode_ = options.consistency.mode;
  rank_ = options.rank;
  compression_ = options.compression.method;
  const bool overlap = overlap_from_config(ctx.config, options.rank);
  worker_ = std::make_unique<PsWorker>(std::move(options), layout_);
  grads_ = worker_->grads_buffer();
  values_ = worker_->values_buffer();
  if (!grads_) {
    own_.resize(2 * size_t(layout_.total));
    grads_ = own_.data();
    values_ = own_.data() + layout_.total;
  }
  if (overlap) {
    overlap_ =
        std::make_shared<PushOverlap>(layout_, worker_->ranges(), [this](int i) { start_push(i); });
    PushOverlap::install(overlap_, params_, layout_);
  }
  const auto t0 = std::chrono::steady_clock::now();
  TransferStats t = worker_->pull(values_);  // start from the servers' parameters
  for (PsMetrics* m : {&interval_, &run_}) m->add_transfer(t, seconds_since(t0), Transfer::kPull);
  step_ = worker_->start_step();  // 0, or where a worker restarted alone rejoins
  scatter_values(params_, layout_, {0, layout_.total}, values_);
}

void PsStrategy::backward(const Tensor& loss, bool sync) {
  if (!overlap_ || !sync) return loss.backward();  // accumulating: no push yet
  overlap_->arm();
  struct Disarm {  // also when backward throws: no hook may start a push after it
    PushOverlap& o;
    ~Disarm() { o.disarm(); }
  } disarm{*overlap_};
  loss.backward();
}

double PsStrategy::clip_grad_norm(double max_norm) {
  // This worker's own gradient, over every parameter, before the push (ps_strategy.h). With
  // the trainer's optim.clip_grad_norm overlap is off; a hand-written loop that clips after a
  // synced backward with ps.overlap on would have pushed unclipped gradients already.
  COHORT_CHECK_ARG(!overlap_ || !overlap_->any_started(),
                   "ps strategy: clip_grad_norm after backward already pushed gradients "
                   "(ps.overlap = true); set ps.overlap = false to clip before the push");
  return optim::clip_grad_norm(params_, max_norm);
}

void PsStrategy::start_push(int i) {
  const KeyRange r = worker_->ranges()[size_t(i)];
  gather_grads(params_, layout_, r, grads_ + r.begin);
  worker_->start_push(i, step_, grads_, values_);
}

TransferStats PsStrategy::push_pull_at_once(OverlapStep* o) {
  gather_grads(params_, layout_, {0, layout_.total}, grads_);
  const auto t0 = std::chrono::steady_clock::now();
  TransferStats t = worker_->push_pull(step_, grads_, values_);
  o->push_pull_s = seconds_since(t0);
  return t;
}

TransferStats PsStrategy::push_pull_overlapped(OverlapStep* o) {
  overlap_->push_rest();  // the ranges backward did not complete
  TransferStats t = worker_->finish_push_pull(step_);
  *o = overlap_->finish(t.answered, std::chrono::steady_clock::now());
  return t;
}

void PsStrategy::step() {
  const auto t0 = std::chrono::steady_clock::now();
  OverlapStep o;
  TransferStats t = overlap_ ? push_pull_overlapped(&o) : push_pull_at_once(&o);
  scatter_values(params_, layout_, {0, layout_.total}, values_);
  ++step_;
  for (PsMetrics* m : {&interval_, &run_}) {
    m->add(t.reply);
    m->add_transfer(t, o.push_pull_s, Transfer::kPushPull);
    m->add_overlap(o);
  }
  const double s = seconds_since(t0);  // what the step waited for
  stats_ = {.comm_s = s + o.hidden_s,
            .exposed_s = s,
            .bytes_sent = t.bytes_sent,
            .bytes_received = t.bytes_received};
}

nlohmann::json PsStrategy::take_interval_metrics() {
  nlohmann::json j = interval_.json(false);
  interval_ = {};
  return j;
}

nlohmann::json PsStrategy::summary_metrics() const {
  nlohmann::json j = run_.json(true);
  j["ps_mode"] = mode_name(mode_);
  j["ps_overlap"] = overlap_ != nullptr;           // false also when clipping turned it off
  j["ps_shared_links"] = worker_->shared_links();  // servers reached through shared memory
  if (compression_ != compress::Method::kNone)
    j["compression"] = compress::method_name(compression_);
  return j;
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

void PsStrategy::finish_training() {
  if (rank_ != 0) {
    worker_->bye();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  TransferStats t = worker_->finish(values_);
  for (PsMetrics* m : {&interval_, &run_}) m->add_transfer(t, seconds_since(t0), Transfer::kPull);
  scatter_values(params_, layout_, {0, layout_.total}, values_);
}

parallel::StrategyRegistration ps_strategy_registration() {
  return {.name = kStrategyName,
          .description =
              "parameter servers (--servers S): workers push gradients, servers "
              "update and serve parameters (BSP, ASP or SSP: ps.mode)",
          .add_keys = add_ps_keys,
          .make = [](const parallel::StrategyContext& ctx) -> std::unique_ptr<parallel::Strategy> {
            return std::make_unique<PsStrategy>(ctx, worker_options(ctx));
          },
          .world = {.joins_group = false}};  // workers talk to servers only
}

}  // namespace cohort::ps
