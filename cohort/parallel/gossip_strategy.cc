#include "cohort/parallel/gossip_strategy.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include "cohort/core/error.h"
#include "cohort/parallel/builtin_strategies.h"

namespace cohort::parallel {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kGossipTag = 0x60551b;

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
}

int64_t total_numel(const NamedTensors& params) {
  int64_t n = 0;
  for (const auto& [name, p] : params) n += p.numel();
  return n;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

GossipStrategy::GossipStrategy(const StrategyContext& ctx, GossipTopology topology,
                               int64_t consensus_every)
    : Strategy(ctx),
      params_(ctx.model.named_parameters()),
      peers_(gossip_peers(topology, ctx.group->rank(), ctx.group->size())),
      consensus_every_(consensus_every) {
  const size_t n = size_t(total_numel(params_));
  sent_.resize(n);
  received_.assign(peers_.neighbours.size(), std::vector<float>(n));
  // Every worker starts from rank 0's parameters, as with DDP.
  for (auto& [name, p] : params_)
    group_->broadcast({.buffer = p.raw_data(), .count = size_t(p.numel())});
}

void GossipStrategy::backward(const Tensor& loss, bool sync) {
  if (!in_flight_) start_exchange();  // beside this step's backward
  loss.backward();
}

void GossipStrategy::start_exchange() {
  bytes_at_start_ = {group_->bytes_sent(), group_->bytes_received()};
  size_t at = 0;
  for (const auto& [name, p] : params_) {
    std::memcpy(sent_.data() + at, p.data<float>(), size_t(p.numel()) * sizeof(float));
    at += size_t(p.numel());
  }
  std::vector<comm::P2POp> ops;
  for (size_t k = 0; k < peers_.neighbours.size(); ++k) {
    const int peer = peers_.neighbours[k];
    ops.push_back(
        {comm::P2POp::kSend, sent_.data(), sent_.size(), comm::DType::f32, peer, kGossipTag});
    ops.push_back({comm::P2POp::kRecv, received_[k].data(), sent_.size(), comm::DType::f32, peer,
                   kGossipTag});
  }
  if (!ops.empty()) exchange_ = group_->batch_send_recv_async(ops);
  in_flight_ = true;
}

void GossipStrategy::step() {
  if (!in_flight_) start_exchange();  // a step without backward (nothing to overlap)
  const auto t0 = Clock::now();
  if (exchange_.valid()) exchange_.wait();
  in_flight_ = false;
  const double waited = seconds_since(t0);
  optimizer_.step();
  mix();
  ++steps_;
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

double GossipStrategy::consensus_distance() {
  std::vector<float> mean(sent_.size());
  size_t at = 0;
  for (const auto& [name, p] : params_) {
    std::memcpy(mean.data() + at, p.data<float>(), size_t(p.numel()) * sizeof(float));
    at += size_t(p.numel());
  }
  const std::vector<float> mine = mean;
  group_->allreduce({.output = mean.data(), .count = mean.size(), .op = comm::ReduceOp::avg});
  double sq = 0;
  for (size_t i = 0; i < mine.size(); ++i) sq += double(mine[i] - mean[i]) * (mine[i] - mean[i]);
  group_->allreduce(
      {.output = &sq, .count = 1, .dtype = comm::DType::f64, .op = comm::ReduceOp::avg});
  return std::sqrt(sq);
}

nlohmann::json GossipStrategy::take_interval_metrics() {
  nlohmann::json j = nlohmann::json::object();
  if (last_consensus_ >= 0) j["consensus_distance"] = last_consensus_;
  return j;
}

nlohmann::json GossipStrategy::summary_metrics() const {
  nlohmann::json j{{"gossip_neighbours", peers_.neighbours}, {"gossip_weight", peers_.weight}};
  if (last_consensus_ >= 0) j["consensus_distance"] = last_consensus_;
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
  return st;
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
}

StrategyRegistration gossip_strategy_registration() {
  return {.name = "gossip",
          .description =
              "decentralized SGD: each worker averages its parameters with its "
              "neighbours' in gossip.topology, no allreduce (D-PSGD)",
          .add_keys = add_gossip_keys,
          .make = [](const StrategyContext& ctx) -> std::unique_ptr<Strategy> {
            if (!ctx.group) return make_none_strategy(ctx);  // a job of one
            return std::make_unique<GossipStrategy>(
                ctx, parse_gossip_topology(ctx.config.get_string("gossip.topology")),
                ctx.config.get_int("gossip.consensus_every"));
          }};
}

}  // namespace cohort::parallel
