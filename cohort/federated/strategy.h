#pragma once
// How the server turns a round's client updates into the next global model: the one
// interface every federated strategy implements (Flower's Strategy, reduced to what the
// server needs). Built in:
//   fedavg   w <- w + lr_s * mean_k(delta_k)            (McMahan et al. 2017; lr_s = 1 is FedAvg)
//   fedprox  fedavg's aggregation; clients add (mu/2)|w - w_global|^2 to their loss
//            (Li et al. 2020), so configure() hands them mu
//   fedavgm  v <- beta v + mean_k(delta_k); w <- w + lr_s v   (server momentum, Hsu et al. 2019)
// mean_k is weighted by each client's samples (or uniform under differential privacy). A new
// strategy derives AggregationStrategy and registers a factory under its name
// (register_strategy), which `fl.strategy` then selects.
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace cohort::federated {

struct StrategyOptions {
  double server_lr = 1.0;
  double server_momentum = 0.9;  // fedavgm's beta
  double mu = 0.01;              // fedprox's proximal weight
};

// What a round produced. Under secure aggregation the server sees only the sum, so `updates`
// is empty and a strategy that needs single updates must refuse it (supports_secure()).
struct RoundAggregate {
  int64_t round = 0;
  std::span<const float> mean_delta;  // the weighted mean of the participants' deltas
  double total_weight = 0;            // the weights' sum (samples, or clients under DP)
  int participants = 0;
  std::vector<std::span<const float>> updates;  // single deltas when the server sees them
};

class AggregationStrategy {
 public:
  virtual ~AggregationStrategy() = default;
  virtual std::string name() const = 0;
  // The proximal weight clients train with this round (0: none).
  virtual double client_mu(int64_t /*round*/) const { return 0; }
  // Whether it works from the mean alone (secure aggregation gives nothing else).
  virtual bool supports_secure() const { return true; }
  // Moves the global model `w` by the round's aggregate.
  virtual void apply(std::span<float> w, const RoundAggregate& round) = 0;
  // Its state across rounds (fedavgm's velocity), for the server's checkpoint.
  virtual std::vector<float> state() const { return {}; }
  virtual void load_state(std::vector<float> /*state*/) {}
};

using StrategyFactory = std::function<std::unique_ptr<AggregationStrategy>(const StrategyOptions&)>;

// The registry fl.strategy reads: the built-ins, plus any added by register_strategy.
class StrategyRegistry {
 public:
  StrategyRegistry();  // fedavg, fedprox, fedavgm
  void add(const std::string& name, StrategyFactory factory);
  // InvalidArgument listing the registered names for an unknown one.
  std::unique_ptr<AggregationStrategy> make(const std::string& name,
                                            const StrategyOptions& options) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, StrategyFactory> factories_;
};

// The process's registry (built-ins plus user additions, before the server starts).
StrategyRegistry& strategy_registry();
inline void register_strategy(const std::string& name, StrategyFactory factory) {
  strategy_registry().add(name, std::move(factory));
}

}  // namespace cohort::federated
