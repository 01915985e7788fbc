#pragma once
// The "gossip" strategy (parallel.strategy = "gossip"): decentralized SGD (Lian et al., D-PSGD,
// NeurIPS 2017). No rank is special and nothing is all-reduced during training: each worker
// steps on its own gradient and averages its parameters with its neighbours' in a fixed graph
// (gossip_topology.h), x_i <- x_i + w * sum_j (x_j - x_i) over its neighbours j, applied on top
// of its own optimizer step. The exchange of step t (every worker's parameters before the
// step, sent to and received from each neighbour at once: batch_send_recv) starts when that
// step's backward starts and runs beside it; step() waits for it.
//
// Workers' parameters differ between steps; how far is the consensus distance, sqrt of the
// mean over ranks of |x_i - mean(x)|^2, measured every gossip.consensus_every steps (one
// allreduce of the parameters and one of a scalar) and reported in the metrics. Each worker's
// own parameters and optimizer slots are per-rank strategy state: checkpoints keep every
// rank's, and a resumed run continues bit-identically (same number of workers).
// A neighbour that dies fails the exchange within comm.timeout_s, naming its rank.
//
// With gossip.compression other than "none" the averaging is CHOCO-Gossip (choco_gossip.h):
// each worker sends its neighbours a compressed difference to its public copy instead of its
// parameters, and pulls towards the copies; the copies are per-rank state too.
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "cohort/comm/work.h"
#include "cohort/parallel/decentralized/choco_gossip.h"
#include "cohort/parallel/decentralized/gossip_topology.h"
#include "cohort/parallel/strategy_registry.h"

namespace cohort::parallel {

struct GossipOptions {
  GossipTopology topology = GossipTopology::kRing;
  int64_t consensus_every = 50;
  std::optional<ChocoOptions> choco;  // compressed gossip; nullopt: exact averaging
};

// The gossip.* keys; InvalidArgument naming the key whose value is out of range.
GossipOptions gossip_options_from(const Config& cfg);

class GossipStrategy : public Strategy, public ReplicatedCheckpoint, public StrategyMetrics {
 public:
  GossipStrategy(const StrategyContext& ctx, const GossipOptions& options);
  std::string name() const override { return "gossip"; }
  void backward(const Tensor& loss, bool sync) override;
  void step() override;
  StrategyStats last_stats() const override { return stats_; }
  nlohmann::json take_interval_metrics() override;
  nlohmann::json summary_metrics() const override;
  void shutdown() noexcept override;
  // per-rank: "param/<name>", "optim/<slot key>"; compressed: "choco/self", "choco/peer<R>"
  StrategyState state() const override;
  void load_state(const StrategyState& state) override;
  // Optimizer steps taken (the codec's round); elastic recovery carries it to a new world.
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  void start_exchange();  // this step's parameters to and from every neighbour
  std::vector<comm::P2POp> exact_ops();
  std::vector<comm::P2POp> compressed_ops();
  void mix();  // the neighbours' share, on top of the optimizer's step
  void choco_mix();
  void load_choco(const StrategyState& state);
  double consensus_distance();
  nlohmann::json compression_metrics(int64_t steps, double encode_s, double decode_s) const;

  NamedTensors params_;
  GossipPeers peers_;
  int64_t consensus_every_;
  std::vector<float> sent_;                   // the parameters before this step, flat
  std::vector<std::vector<float>> received_;  // each neighbour's, flat
  comm::Work exchange_;
  bool in_flight_ = false;
  std::pair<uint64_t, uint64_t> bytes_at_start_;  // the group's counters when it started
  std::unique_ptr<ChocoGossip> choco_;            // null: exact gossip
  int64_t steps_ = 0;
  double last_consensus_ = -1;  // -1: not measured yet
  // Compressed gossip's codec time: since the last interval record, and over the run.
  double encode_s_ = 0, decode_s_ = 0, total_encode_s_ = 0, total_decode_s_ = 0;
  int64_t interval_steps_ = 0, timed_steps_ = 0;  // timed_steps_: by this process (not resumed)
  StrategyStats stats_;
};

StrategyRegistration gossip_strategy_registration();

}  // namespace cohort::parallel
