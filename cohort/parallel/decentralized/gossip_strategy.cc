#include "cohort/parallel/decentralized/gossip_strategy.h"
#include "cohort/core/clock.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "cohort/compress/codec_keys.h"
#include "cohort/core/error.h"
#include "cohort/core/rng.h"
#include "cohort/parallel/builtin_strategies.h"
#include "cohort/tensor/tensor.h"

namespace cohort::parallel {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kGossipTag = 0x60551b;

// Compressed gossip's codec keys (compress/codec_keys.h) plus CHOCO's consensus step; no
// error feedback key: CHOCO's public copies already carry what was not sent.
void add_compression_keys(ConfigRegistry& r) {
  compress::add_codec_keys(
      r,
      {.prefix = "gossip",
       .topk_ratio = 0.1,
       .qsgd_levels = 16,
       .compression_doc =
           "Gossip: none (exact averaging of the neighbours' parameters) or a codec of "
           "docs/compression.md (fp16, bf16, topk, randomk, signsgd, qsgd) for CHOCO-Gossip: each "
           "worker sends the compressed difference to its public copy (docs/decentralized.md).",
       .topk_ratio_doc = "Compressed gossip, topk and randomk: the share of the parameters' "
                         "differences sent per step, in (0, 1].",
       .qsgd_levels_doc =
           "Compressed gossip, qsgd: the quantization levels s (each value travels as a byte).",
       .after_compression = {{"gossip.consensus_step",
                              ConfigType::kFloat,
                              0.0,
                              "Compressed gossip: CHOCO's consensus step gamma, in (0, 1]: how far "
                              "each step moves towards the neighbours' copies; too large diverges "
                              "with sparse codecs. 0: by codec (fp16, bf16: 1; topk: 2 * "
                              "gossip.topk_ratio, at most 0.3; randomk: ratio / 2; qsgd: 0.3; "
                              "signsgd: 0.5).",
                              "",
                              {},
                              0.0,
                              1.0}}});
}

void add_gossip_keys(ConfigRegistry& r) {
  r.add({"gossip.topology",
         ConfigType::kString,
         std::string("ring"),
         "parallel.strategy = 'gossip': the graph each worker averages its parameters over "
         "(`ring`: rank +-1; `exponential`: rank +- 2^k; `torus`: a 2-D grid that wraps).",
         "",
         {"ring", "exponential", "torus"}});
  r.add({"gossip.consensus_every",
         ConfigType::kInt,
         int64_t(50),
         "Gossip: measure the consensus distance (how far the workers' parameters are from "
         "their average) every N steps, with two allreduces; 0: never.",
         "",
         {},
         0.0});
  add_compression_keys(r);
}

int64_t total_numel(const NamedTensors& params) {
  int64_t n = 0;
  for (const auto& [name, p] : params) n += p.numel();
  return n;
}

void flatten(const NamedTensors& params, std::vector<float>& out) {
  size_t at = 0;
  for (const auto& [name, p] : params) {
    std::memcpy(out.data() + at, p.data<float>(), size_t(p.numel()) * sizeof(float));
    at += size_t(p.numel());
  }
}

std::optional<ChocoOptions> choco_options_from(const Config& cfg) {
  const compress::CodecSettings codec = compress::read_codec_keys(cfg, "gossip");
  const auto method = codec.method();
  if (method == compress::Method::kNone) return std::nullopt;
  // randomk: sender and receivers draw the same indices from this seed and the step.
  ChocoOptions o{.codec = {.method = method,
                           .ratio = codec.checked_ratio(),
                           .seed = derive_seed(compress::shared_seed(cfg), "gossip.randomk"),
                           .levels = codec.qsgd_levels}};
  const double gamma = cfg.get_float("gossip.consensus_step");  // 0: auto
  COHORT_CHECK_ARG(gamma >= 0 && gamma <= 1, "gossip.consensus_step = ", gamma,
                   " is outside (0, 1] (0: by codec)");
  o.gamma = gamma > 0 ? gamma : default_consensus_step(o.codec);
  return o;
}

}  // namespace

GossipOptions gossip_options_from(const Config& cfg) {
  return {.topology = parse_gossip_topology(cfg.get_string("gossip.topology")),
          .consensus_every = cfg.get_int("gossip.consensus_every"),
          .choco = choco_options_from(cfg)};
}

GossipStrategy::GossipStrategy(const StrategyContext& ctx, const GossipOptions& options)
    : Strategy(ctx),
      ReplicatedCheckpoint(ctx),
      params_(ctx.model.named_parameters()),
      peers_(gossip_peers(options.topology, ctx.group->rank(), ctx.group->size())),
      consensus_every_(options.consensus_every) {
  const size_t n = size_t(total_numel(params_));
  sent_.resize(n);
  // Every worker starts from rank 0's parameters, as with DDP.
  for (auto& [name, p] : params_)
    group_->broadcast({.buffer = p.raw_data(), .count = size_t(p.numel())});
  if (!options.choco) {
    received_.assign(peers_.neighbours.size(), std::vector<float>(n));
    return;
  }
  choco_ = std::make_unique<ChocoGossip>(*options.choco, n, peers_.neighbours.size());
  // The common start is every worker's public copy: all copies agree without a message.
  flatten(params_, sent_);
  choco_->reset(sent_);
}

void GossipStrategy::backward(const Tensor& loss, bool sync) {
  if (!in_flight_) start_exchange();  // beside this step's backward
  loss.backward();
}

void GossipStrategy::start_exchange() {
  bytes_at_start_ = {group_->bytes_sent(), group_->bytes_received()};
  flatten(params_, sent_);
  const std::vector<comm::P2POp> ops = choco_ ? compressed_ops() : exact_ops();
  if (!ops.empty()) exchange_ = group_->batch_send_recv_async(ops);
  in_flight_ = true;
}

std::vector<comm::P2POp> GossipStrategy::exact_ops() {
  std::vector<comm::P2POp> ops;
  for (size_t k = 0; k < peers_.neighbours.size(); ++k) {
    const int peer = peers_.neighbours[k];
    ops.push_back(
        {comm::P2POp::kSend, sent_.data(), sent_.size(), comm::DType::f32, peer, kGossipTag});
    ops.push_back({comm::P2POp::kRecv, received_[k].data(), sent_.size(), comm::DType::f32, peer,
                   kGossipTag});
  }
  return ops;
}

// The message is encoded from the parameters before the optimizer step, so the exchange runs
// beside backward as the exact one does; the pull is then added on top of the step (the
// order of D-PSGD, which the exact mode follows too).
std::vector<comm::P2POp> GossipStrategy::compressed_ops() {
  const auto t0 = Clock::now();
  std::span<const uint8_t> msg = choco_->encode(sent_, uint64_t(steps_));
  encode_s_ += seconds_since(t0);
  void* out = const_cast<uint8_t*>(msg.data());  // only read: a send
  std::vector<comm::P2POp> ops;
  for (size_t k = 0; k < peers_.neighbours.size(); ++k) {
    const int peer = peers_.neighbours[k];
    ops.push_back({comm::P2POp::kSend, out, msg.size(), comm::DType::u8, peer, kGossipTag});
    ops.push_back({comm::P2POp::kRecv, choco_->inbox(k).data(), msg.size(), comm::DType::u8, peer,
                   kGossipTag});
  }
  return ops;
}

void GossipStrategy::step() {
  if (!in_flight_) start_exchange();  // a step without backward (nothing to overlap)
  const auto t0 = Clock::now();
  if (exchange_.valid()) exchange_.wait();
  in_flight_ = false;
  const double waited = seconds_since(t0);
  optimizer_.step();
  if (choco_) {
    choco_mix();
  } else {
    mix();
  }
  ++steps_;
  ++interval_steps_;
  if (consensus_every_ > 0 && steps_ % consensus_every_ == 0)
    last_consensus_ = consensus_distance();
  // The bytes since the exchange started: one copy of the parameters per neighbour each way,
  // plus the consensus allreduces when measured.
  stats_ = {.comm_s = waited,
            .exposed_s = waited,
            .bytes_sent = group_->bytes_sent() - bytes_at_start_.first,
            .bytes_received = group_->bytes_received() - bytes_at_start_.second};
}

void GossipStrategy::mix() {
  if (peers_.neighbours.empty()) return;
  const float w = float(peers_.weight);
  size_t at = 0;
  for (auto& [name, p] : params_) {
    float* x = p.data<float>();
    for (int64_t i = 0; i < p.numel(); ++i, ++at) {
      float pull = 0;  // sum over neighbours of (x_j - x_i), at the step's start
      for (const std::vector<float>& r : received_) pull += r[at] - sent_[at];
      x[i] += w * pull;
    }
  }
}

void GossipStrategy::choco_mix() {
  const auto t0 = Clock::now();
  choco_->update(uint64_t(steps_));
  size_t at = 0;
  for (auto& [name, p] : params_) {
    choco_->pull({p.data<float>(), size_t(p.numel())}, at, peers_.weight);
    at += size_t(p.numel());
  }
  decode_s_ += seconds_since(t0);
}

double GossipStrategy::consensus_distance() {
  std::vector<float> mean(sent_.size());
  flatten(params_, mean);
  const std::vector<float> mine = mean;
  group_->allreduce({.output = mean.data(), .count = mean.size(), .op = comm::ReduceOp::avg});
  double sq = 0;
  for (size_t i = 0; i < mine.size(); ++i) sq += double(mine[i] - mean[i]) * (mine[i] - mean[i]);
  group_->allreduce(
      {.output = &sq, .count = 1, .dtype = comm::DType::f64, .op = comm::ReduceOp::avg});
  return std::sqrt(sq);
}

// What one step sends to the neighbours against the float32 parameters it stands for, and
// the codec's time per step (the names of DDP's compression metrics, docs/compression.md).
nlohmann::json GossipStrategy::compression_metrics(int64_t steps, double encode_s,
                                                   double decode_s) const {
  const double per_step = 1e3 / double(std::max<int64_t>(steps, 1));
  const size_t raw = choco_->numel() * sizeof(float) * peers_.neighbours.size();
  const size_t sent = choco_->message_bytes() * peers_.neighbours.size();
  return {{"compress_raw_bytes", raw},
          {"compress_message_bytes", sent},
          {"compress_ratio", sent ? double(raw) / double(sent) : 1.0},
          {"compress_encode_ms", encode_s * per_step},
          {"compress_decode_ms", decode_s * per_step}};
}

nlohmann::json GossipStrategy::take_interval_metrics() {
  nlohmann::json j = nlohmann::json::object();
  if (last_consensus_ >= 0) j["consensus_distance"] = last_consensus_;
  if (choco_) j.update(compression_metrics(interval_steps_, encode_s_, decode_s_));
  total_encode_s_ += encode_s_;
  total_decode_s_ += decode_s_;
  encode_s_ = decode_s_ = 0;
  timed_steps_ += interval_steps_;
  interval_steps_ = 0;
  return j;
}

nlohmann::json GossipStrategy::summary_metrics() const {
  nlohmann::json j{{"gossip_neighbours", peers_.neighbours}, {"gossip_weight", peers_.weight}};
  if (last_consensus_ >= 0) j["consensus_distance"] = last_consensus_;
  if (!choco_) return j;
  j.update(compression_metrics(timed_steps_ + interval_steps_, total_encode_s_ + encode_s_,
                               total_decode_s_ + decode_s_));
  j["compression"] = compress::method_name(choco_->method());
  j["gossip_consensus_step"] = choco_->gamma();
  return j;
}

void GossipStrategy::shutdown() noexcept {
  if (!in_flight_ || !exchange_.valid()) return;
  try {
    exchange_.wait();                // an exchange started by a backward whose step never came
  } catch (const std::exception&) {  // the job is failing already
  }
  in_flight_ = false;
}

StrategyState GossipStrategy::state() const {
  StrategyState st;
  st.per_rank = true;
  for (const auto& [name, p] : params_) st.tensors.emplace_back("param/" + name, p);
  for (const auto& [key, t] : optimizer_.export_state().tensors)
    st.tensors.emplace_back("optim/" + key, t);
  st.values["steps"] = steps_;  // the same on every rank: the codec's round
  if (!choco_) return st;
  const int64_t n = int64_t(choco_->numel());
  st.tensors.emplace_back("choco/self", from_vector(choco_->self(), {n}));
  for (size_t k = 0; k < peers_.neighbours.size(); ++k) {
    st.tensors.emplace_back("choco/peer" + std::to_string(peers_.neighbours[k]),
                            from_vector(choco_->peer(k), {n}));
  }
  return st;
}

// The public copies, or zeros (CHOCO's own start, the same on every rank) when the checkpoint
// comes from exact gossip: the copies must agree between neighbours, not match anything else.
void GossipStrategy::load_choco(const StrategyState& state) {
  std::map<std::string, const Tensor*> saved;
  for (const auto& [name, t] : state.tensors) saved[name] = &t;
  if (!saved.count("choco/self")) {
    choco_->reset({});
    return;
  }
  auto restore = [&](const std::string& name, std::vector<float>& into) {
    auto it = saved.find(name);
    COHORT_CHECK_ARG(it != saved.end() && it->second->numel() == int64_t(into.size()) &&
                         it->second->dtype() == DType::f32,
                     "gossip: the checkpoint's per-rank state has no f32 '", name, "' of ",
                     into.size(), " values (resume with the same topology)");
    std::memcpy(into.data(), it->second->data<float>(), into.size() * sizeof(float));
  };
  restore("choco/self", choco_->self());
  for (size_t k = 0; k < peers_.neighbours.size(); ++k)
    restore("choco/peer" + std::to_string(peers_.neighbours[k]), choco_->peer(k));
}

void GossipStrategy::load_state(const StrategyState& state) {
  std::map<std::string, Tensor> params;
  optim::OptimizerState opt = optimizer_.export_state();  // the scalars, as restored
  opt.tensors.clear();
  for (const auto& [name, t] : state.tensors) {
    if (name.rfind("param/", 0) == 0) params[name.substr(6)] = t;
    if (name.rfind("optim/", 0) == 0) opt.tensors[name.substr(6)] = t;
  }
  for (auto& [name, p] : params_) {
    auto it = params.find(name);
    COHORT_CHECK_ARG(
        it != params.end() && it->second.numel() == p.numel() && it->second.dtype() == DType::f32,
        "gossip: the checkpoint's per-rank state has no f32 parameter '", name, "' of ", p.numel(),
        " values");
    std::memcpy(p.data<float>(), it->second.data<float>(), size_t(p.numel()) * sizeof(float));
  }
  optimizer_.import_state(opt);
  steps_ = state.values.value("steps", int64_t(0));
  if (choco_) load_choco(state);
}

StrategyRegistration gossip_strategy_registration() {
  return {.name = "gossip",
          .description =
              "decentralized SGD: each worker averages its parameters with its "
              "neighbours' in gossip.topology, no allreduce (D-PSGD)",
          .add_keys = add_gossip_keys,
          .make = [](const StrategyContext& ctx) -> std::unique_ptr<Strategy> {
            if (!ctx.group) return make_none_strategy(ctx);  // a job of one
            return std::make_unique<GossipStrategy>(ctx, gossip_options_from(ctx.config));
          }};
}

}  // namespace cohort::parallel
