#include "cohort/federated/strategy.h"

#include <mutex>

#include "cohort/core/error.h"

namespace cohort::federated {
namespace {

// w += lr_s * mean: FedAvg when lr_s = 1 (the mean delta is the mean of the local models
// minus the global one).
class FedAvg : public AggregationStrategy {
 public:
  explicit FedAvg(const StrategyOptions& o) : lr_(o.server_lr) {}
  std::string name() const override { return "fedavg"; }
  void apply(std::span<float> w, const RoundAggregate& r) override {
    check_size(w, r);
    for (size_t i = 0; i < w.size(); ++i) w[i] += float(lr_ * r.mean_delta[i]);
  }

 protected:
  static void check_size(std::span<float> w, const RoundAggregate& r) {
    COHORT_CHECK_ARG(r.mean_delta.size() == w.size(), "federated strategy: the round's delta has ",
                     r.mean_delta.size(), " values, the model ", w.size());
  }
  double lr_;
};

class FedProx : public FedAvg {
 public:
  explicit FedProx(const StrategyOptions& o) : FedAvg(o), mu_(o.mu) {
    COHORT_CHECK_ARG(mu_ >= 0, "fl.mu must be >= 0 (got ", mu_, ")");
  }
  std::string name() const override { return "fedprox"; }
  double client_mu(int64_t) const override { return mu_; }

 private:
  double mu_;
};

class FedAvgM : public FedAvg {
 public:
  explicit FedAvgM(const StrategyOptions& o) : FedAvg(o), beta_(o.server_momentum) {}
  std::string name() const override { return "fedavgm"; }
  void apply(std::span<float> w, const RoundAggregate& r) override {
    check_size(w, r);
    if (velocity_.size() != w.size()) velocity_.assign(w.size(), 0.f);
    for (size_t i = 0; i < w.size(); ++i) {
      velocity_[i] = float(beta_ * velocity_[i] + r.mean_delta[i]);
      w[i] += float(lr_ * velocity_[i]);
    }
  }
  std::vector<float> state() const override { return velocity_; }
  void load_state(std::vector<float> s) override { velocity_ = std::move(s); }

 private:
  double beta_;
  std::vector<float> velocity_;
};

}  // namespace

StrategyRegistry::StrategyRegistry() {
  add("fedavg", [](const StrategyOptions& o) { return std::make_unique<FedAvg>(o); });
  add("fedprox", [](const StrategyOptions& o) { return std::make_unique<FedProx>(o); });
  add("fedavgm", [](const StrategyOptions& o) { return std::make_unique<FedAvgM>(o); });
}

void StrategyRegistry::add(const std::string& name, StrategyFactory factory) {
  COHORT_CHECK_ARG(!name.empty() && factory, "register_strategy: a name and a factory");
  factories_[name] = std::move(factory);
}

std::vector<std::string> StrategyRegistry::names() const {
  std::vector<std::string> n;
  for (const auto& [name, f] : factories_) n.push_back(name);
  return n;
}

std::unique_ptr<AggregationStrategy> StrategyRegistry::make(const std::string& name,
                                                            const StrategyOptions& o) const {
  auto it = factories_.find(name);
  if (it == factories_.end()) {
    std::string known;
    for (const std::string& n : names()) known += (known.empty() ? "" : ", ") + n;
    COHORT_CHECK_ARG(false, "fl.strategy: unknown strategy '", name, "' (registered: ", known, ")");
  }
  return it->second(o);
}

StrategyRegistry& strategy_registry() {
  static StrategyRegistry registry;  // the one place strategies are looked up by name
  return registry;
}

}  // namespace cohort::federated
