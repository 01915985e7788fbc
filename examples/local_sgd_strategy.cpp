// A training strategy of your own, plugged into `cohort train` with no edit to cohort itself:
// local SGD (each worker steps on its own; every H steps the workers average their
// parameters). This program is the whole cohort CLI plus one registration:
//
//   local_sgd_strategy train examples/fashion_mlp.toml --workers 2 \
//       --set parallel.strategy=local_sgd_example --set local_sgd_example.period=8
//
// cohort has local SGD built in (`--set parallel.strategy=local_sgd`, with post-local SGD's
// warm-up, checkpoints and metrics: cohort/parallel/decentralized/local_sgd_strategy.h); this
// stripped-down variant, one allreduce per parameter and no warm-up, only shows the seam.
#include <chrono>

#include "cohort/parallel/strategy_registry.h"
#include "tools/cohort/cli.h"

namespace {

using namespace cohort;
using Clock = std::chrono::steady_clock;

class LocalSgd : public parallel::Strategy,
                 public parallel::ReplicatedCheckpoint,  // the model whole, plus state()
                 public parallel::StrategyMetrics {
 public:
  explicit LocalSgd(const parallel::StrategyContext& ctx)
      : Strategy(ctx),
        ReplicatedCheckpoint(ctx),
        period_(ctx.config.get_int("local_sgd_example.period")) {
    for (const auto& [name, p] : model_.named_parameters()) params_.push_back(p);
    // Every worker starts from rank 0's model.
    for (Tensor& p : params_) group_->broadcast({.buffer = p.raw_data(), .count = count(p)});
  }
  std::string name() const override { return "local_sgd_example"; }

  // backward() and forward() stay the defaults: no communication during backward.
  void step() override {
    optimizer_.step();
    stats_ = {};
    if (++steps_ % period_ != 0) return;
    auto start = Clock::now();
    uint64_t sent = group_->bytes_sent(), received = group_->bytes_received();
    for (Tensor& p : params_) {
      group_->allreduce({.output = p.raw_data(), .count = count(p), .op = comm::ReduceOp::avg});
    }
    stats_.comm_s = stats_.exposed_s = std::chrono::duration<double>(Clock::now() - start).count();
    stats_.bytes_sent = group_->bytes_sent() - sent;
    stats_.bytes_received = group_->bytes_received() - received;
  }
  parallel::StrategyStats last_stats() const override { return stats_; }

  // Saved in checkpoints, so a resumed run averages at the same steps.
  parallel::StrategyState state() const override {
    parallel::StrategyState s;
    s.values["steps"] = steps_;
    return s;
  }
  void load_state(const parallel::StrategyState& s) override {
    steps_ = s.values.at("steps").get<int64_t>();
  }

 private:
  static size_t count(const Tensor& p) { return size_t(p.numel()); }
  int64_t period_;
  int64_t steps_ = 0;
  std::vector<Tensor> params_;
  parallel::StrategyStats stats_;
};

void add_keys(ConfigRegistry& r) {
  r.add({"local_sgd_example.period",
         ConfigType::kInt,
         int64_t(4),
         "Steps between parameter averages.",
         "",
         {},
         1.0});
}

}  // namespace

int main(int argc, char** argv) {
  parallel::register_strategy(
      {.name = "local_sgd_example",
       .description = "local SGD: average parameters every local_sgd_example.period steps",
       .add_keys = add_keys,
       .make = [](const parallel::StrategyContext& ctx) -> std::unique_ptr<parallel::Strategy> {
         if (!ctx.group) return parallel::make_strategy("none", ctx);  // a job of one
         return std::make_unique<LocalSgd>(ctx);
       }});
  return cli::main(argc, argv);
}
