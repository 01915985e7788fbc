// The "ddp" strategy: parallel::DDP behind the Strategy seam, with its config keys.
#include "cohort/parallel/ddp/ddp_strategy.h"

#include "cohort/compress/codec_keys.h"
#include "cohort/core/logging.h"
#include "cohort/core/rng.h"
#include "cohort/parallel/builtin_strategies.h"
#include "cohort/parallel/ddp/compression_hook.h"
#include "cohort/parallel/ddp/powersgd_hook.h"

namespace cohort::parallel {
namespace {

std::vector<std::string> compression_choices() {
  std::vector<std::string> c = compress::method_names();
  c.push_back("powersgd");  // a hook of its own: it needs the allreduce between its halves
  return c;
}

// DDP's codec keys (compress/codec_keys.h) plus its own: PowerSGD's, and how top-k travels.
void add_compression_keys(ConfigRegistry& r) {
  compress::add_codec_keys(
      r,
      {.prefix = "ddp",
       .choices = compression_choices(),
       .topk_ratio = 0.01,
       .qsgd_levels = 8,
       .compression_doc =
           "Gradient compression (docs/compression.md): none, fp16 or bf16 (cast, allreduce, cast "
           "back), topk or randomk (k = ddp.topk_ratio of each bucket, with error feedback), "
           "signsgd (EF-signSGD: one bit per value and a scale), qsgd (ddp.qsgd_levels levels, "
           "stochastic rounding), powersgd (rank-ddp.powersgd_rank factors, error feedback).",
       .topk_ratio_doc =
           "topk, randomk: the share of each bucket's gradients sent per step, in (0, 1].",
       .qsgd_levels_doc =
           "qsgd: the quantization levels s of |x_i| / |x|_2 (each value travels as a byte).",
       .error_feedback_doc =
           "topk, randomk, signsgd: keep what was not sent and add it to the next step's gradient "
           "(per-rank state: each rank's residuals go into its strategy.rank<R> checkpoint "
           "file, so resume stays exact with the same number of workers).",
       .after_compression = {{"ddp.powersgd_rank",
                              ConfigType::kInt,
                              int64_t(1),
                              "powersgd: the rank r of each gradient matrix's factors P [n, r] "
                              "and Q [m, r] (PyTorch's matrix_approximation_rank).",
                              "",
                              {},
                              1.0,
                              1024.0},
                             {"ddp.powersgd_start_step",
                              ConfigType::kInt,
                              int64_t(10),
                              "powersgd: steps 1..N average the full gradient (PyTorch's "
                              "start_powerSGD_iter); factorization starts after.",
                              "",
                              {},
                              0.0}}});
  r.add({"ddp.sparse_exchange",
         ConfigType::kString,
         std::string("auto"),
         "topk: how the (index, value) pairs travel: sparse (allgather), dense (scattered into "
         "zeros, allreduce), or auto (sparse when 2 * k * world < bucket numel).",
         "",
         {"auto", "sparse", "dense"}});
}

SparseExchange parse_exchange(const std::string& s) {
  if (s == "sparse") return SparseExchange::kSparse;
  if (s == "dense") return SparseExchange::kDense;
  COHORT_CHECK_ARG(s == "auto", "ddp.sparse_exchange = \"", s,
                   "\" is not one of auto, sparse, dense");
  return SparseExchange::kAuto;
}

void add_ddp_keys(ConfigRegistry& r) {
  r.add({"ddp.bucket_mb",
         ConfigType::kFloat,
         25.0,
         "Gradient bucket size in MiB (PyTorch's bucket_cap_mb).",
         "",
         {},
         0.001});
  r.add({"ddp.first_bucket_mb",
         ConfigType::kFloat,
         1.0,
         "Size of the first bucket in MiB: small, so communication starts early in backward.",
         "",
         {},
         0.001});
  r.add({"ddp.find_unused_parameters", ConfigType::kBool, false,
         "Tolerate parameters that get no gradient (counted as zero) instead of failing."});
  r.add({"ddp.gradient_as_bucket_view", ConfigType::kBool, true,
         "Each parameter's .grad is its slot of the gradient bucket (PyTorch's "
         "gradient_as_bucket_view): no copy of the averaged gradient back into .grad."});
  r.add({"ddp.check_every",
         ConfigType::kInt,
         int64_t(0),
         "Debug: every N steps hash the parameters on every rank and name any rank that "
         "diverged. 0: off.",
         "",
         {},
         0.0});
  add_compression_keys(r);
}

}  // namespace

DdpOptions ddp_options_from(const Config& cfg) {
  DdpOptions o;
  o.bucket_bytes = size_t(cfg.get_float("ddp.bucket_mb") * double(1 << 20));
  o.first_bucket_bytes = size_t(cfg.get_float("ddp.first_bucket_mb") * double(1 << 20));
  o.find_unused_parameters = cfg.get_bool("ddp.find_unused_parameters");
  o.check_every = cfg.get_int("ddp.check_every");
  o.gradient_as_bucket_view = cfg.get_bool("ddp.gradient_as_bucket_view");
  return o;
}

PowerSgdOptions powersgd_options_from(const Config& cfg) {
  return {.rank = int(cfg.get_int("ddp.powersgd_rank")),
          .start_step = cfg.get_int("ddp.powersgd_start_step"),
          .error_feedback = cfg.get_bool("ddp.error_feedback"),
          .seed = derive_seed(compress::shared_seed(cfg), "ddp.powersgd")};
}

std::shared_ptr<CommHook> compression_hook_from(const Config& cfg) {
  if (cfg.get_string("ddp.compression") == "powersgd")
    return std::make_shared<PowerSgdHook>(powersgd_options_from(cfg));
  auto options = compression_options_from(cfg);
  if (!options) return nullptr;
  return std::make_shared<CompressionHook>(*options);
}

std::optional<CompressionOptions> compression_options_from(const Config& cfg) {
  const compress::CodecSettings codec = compress::read_codec_keys(cfg, "ddp");
  const compress::Method method = codec.method();
  if (method == compress::Method::kNone) return std::nullopt;
  return CompressionOptions{.method = method,
                            .topk_ratio = codec.checked_ratio(),
                            .error_feedback = codec.error_feedback,
                            .exchange = parse_exchange(cfg.get_string("ddp.sparse_exchange")),
                            .seed = derive_seed(compress::shared_seed(cfg), "ddp.randomk"),
                            .qsgd_levels = codec.qsgd_levels};
}

DdpStrategy::DdpStrategy(const StrategyContext& ctx, DdpOptions options)
    : Strategy(ctx), ReplicatedCheckpoint(ctx), ddp_(ctx.model, ctx.group, options) {}

void DdpStrategy::trace_to(metrics::Tracer* tracer) {
  ddp_.set_tracer(tracer);
}

void DdpStrategy::backward(const Tensor& loss, bool sync) {
  if (sync) {
    loss.backward();
    return;
  }
  auto local = ddp_.no_sync();  // accumulate in .grad; the synced backward averages the sum
  loss.backward();
}

StrategyStats DdpStrategy::last_stats() const {
  const DdpStepStats& d = ddp_.last_step();
  return {.comm_s = d.comm_s,
          .exposed_s = d.exposed_s,
          .bytes_sent = d.bytes_sent,
          .bytes_received = d.bytes_received};
}

nlohmann::json DdpStrategy::take_interval_metrics() {
  return ddp_.comm_hook().take_interval_metrics();
}

nlohmann::json DdpStrategy::summary_metrics() const {
  return ddp_.comm_hook().summary_metrics();
}

StrategyState DdpStrategy::state() const {
  StrategyState st = ddp_.comm_hook().state();
  st.values = {{"comm_hook", ddp_.comm_hook().name()}, {"hook", st.values}};  // per_rank kept
  return st;
}

void DdpStrategy::load_state(const StrategyState& state) {
  std::string saved = state.values.value("comm_hook", "");
  if (saved != ddp_.comm_hook().name()) {
    if (!state.tensors.empty() || !state.values.value("hook", nlohmann::json::object()).empty()) {
      log::warn("ddp", "the checkpoint holds the state of comm hook '", saved, "', this DDP runs '",
                ddp_.comm_hook().name(),
                "': that state is not restored (register the hook before loading)");
    }
    return;
  }
  StrategyState hook{state.tensors, state.values.at("hook")};
  ddp_.comm_hook().load_state(hook);
}

StrategyRegistration ddp_strategy_registration() {
  return {.name = "ddp",
          .description = "data parallel: gradients averaged by allreduce during backward",
          .add_keys = add_ddp_keys,
          .make = [](const StrategyContext& ctx) -> std::unique_ptr<Strategy> {
            if (ctx.group == nullptr) return make_none_strategy(ctx);  // a job of one
            std::shared_ptr<CommHook> hook = compression_hook_from(ctx.config);
            auto s = std::make_unique<DdpStrategy>(ctx, ddp_options_from(ctx.config));
            if (hook) s->ddp().register_comm_hook(hook);
            return s;
          },
          .world = {.on_mesh = "model_parallel"}};  // with parallel.pp/tp > 1
}

}  // namespace cohort::parallel
