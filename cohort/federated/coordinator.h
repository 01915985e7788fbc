#pragma once
// Coordinator: the server's rounds. Each round it samples clients (a fraction C of the
// expected K, at least min_clients, from those connected; deterministic from the seed, the
// round and the attempt), runs the round on FlServer, and turns what came back into the
// round's mean delta:
//   plain:   sum_k w_k delta_k / sum_k w_k, w_k = samples (uniform under DP)
//   secure:  the same from the secure sum (secagg.h), whose last element is sum_k w_k
//   DP:      (sum_k clip(delta_k) + N(0, (z S)^2)) / m  (McMahan et al. 2018, central DP; the
//            fixed denominator m = clients sampled), and the RDP accountant adds the round
// then the aggregation strategy (strategy.h) moves the global model. The first round waits for
// all K clients to connect (at most wait_clients); later ones for min_clients. A round with fewer
// than min_clients updates does not count and is tried again (max_retries times, then Timeout).
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cohort/federated/dp.h"
#include "cohort/federated/server.h"
#include "cohort/federated/strategy.h"

namespace cohort::federated {

struct DpOptions {
  double clip = 0;              // S; 0: no differential privacy
  double noise_multiplier = 0;  // z
  double delta = 1e-5;          // the delta of the reported (epsilon, delta)
  bool enabled() const { return clip > 0; }
};

struct CoordinatorOptions {
  int clients = 10;       // K, the clients the job expects
  double fraction = 0.5;  // C
  int min_clients = 2;    // a round needs this many updates
  int max_retries = 3;    // attempts of a round beyond the first
  std::chrono::milliseconds round_timeout{std::chrono::seconds(120)};
  std::chrono::milliseconds phase_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds wait_clients{std::chrono::seconds(120)};
  TaskSettings task;  // lr, epochs/steps (mu comes from the strategy)
  bool secure = false;
  double threshold_fraction = 0.5;  // secure aggregation: t = floor(fraction * n) + 1
  int frac_bits = 24;
  DpOptions dp;
  uint64_t seed = 0;
};

struct DroppedClient {
  uint32_t id = 0;
  std::string why;
};

// What one round did: printed, written to metrics.jsonl, and asserted by the tests.
struct RoundRecord {
  int64_t round = 0;
  int attempts = 1;
  std::vector<uint32_t> sampled, participants;
  std::vector<DroppedClient> dropped;
  double seconds = 0;
  double bytes_in_per_client = 0, bytes_out_per_client = 0;  // means over the sampled
  double train_loss = -1;  // plain rounds: the participants' mean; -1 under secure aggregation
  double epsilon = -1;     // DP: the (epsilon, delta) so far; -1 without DP
  nlohmann::json to_json() const;
};

class Coordinator {
 public:
  Coordinator(FlServer& server, std::unique_ptr<AggregationStrategy> strategy,
              CoordinatorOptions options, std::vector<float> initial);
  // Runs round `round` (retrying) and applies it to the global model.
  RoundRecord run_round(int64_t round);
  const std::vector<float>& global() const { return global_; }
  std::vector<float>& global() { return global_; }
  // Which clients a round's attempt samples from `connected` (sorted ids).
  std::vector<uint32_t> sample(const std::vector<uint32_t>& connected, int64_t round,
                               int attempt) const;
  // State for the server's checkpoint: the accountant (JSON) and the strategy's tensors.
  nlohmann::json state() const;
  void load_state(const nlohmann::json& state, std::vector<float> global,
                  std::vector<float> strategy_state);
  AggregationStrategy& strategy() { return *strategy_; }

 private:
  RoundPlan plan(int64_t round, std::vector<uint32_t> sampled) const;
  // The mean delta of a completed round; false when it had too few participants.
  bool aggregate(const RoundResult& res, const RoundPlan& plan, RoundRecord& rec);
  // InvalidArgument for weights that make no mean (the attempt does not count).
  std::vector<float> mean_of_updates(const RoundResult& res, const RoundPlan& plan,
                                     double* total_weight) const;
  std::vector<float> mean_of_secure_sum(const RoundResult& res, const RoundPlan& plan,
                                        double* total_weight) const;

  FlServer& server_;
  std::unique_ptr<AggregationStrategy> strategy_;
  CoordinatorOptions options_;
  std::vector<float> global_;
  RdpAccountant accountant_;
  // Seeds the DP noise: random per job (noise anyone could recompute from the config would
  // protect nothing), kept in the checkpoint so a resumed server draws the same noise.
  uint64_t noise_seed_ = 0;
  bool started_ = false;  // the first round run here waits for all clients
};

}  // namespace cohort::federated
