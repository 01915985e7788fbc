#include "cohort/parallel/strategy.h"

#include "cohort/optim/clip.h"
#include "cohort/parallel/builtin_strategies.h"

namespace cohort::parallel {

void Strategy::backward(const Tensor& loss, bool /*sync*/) {
  loss.backward();
}

double Strategy::clip_grad_norm(double max_norm) {
  return optim::clip_grad_norm(optimizer_.params(), max_norm);
}

namespace {

// Single-process training: every default of Strategy.
class NoneStrategy : public Strategy {
 public:
  explicit NoneStrategy(const StrategyContext& ctx) : Strategy(ctx) {
    COHORT_CHECK_ARG(ctx.group == nullptr || ctx.group->size() == 1,
                     "parallel.strategy = 'none' trains a single process, but this job has ",
                     ctx.group ? ctx.group->size() : 1,
                     " workers; choose a distributed strategy (e.g. 'ddp')");
  }
  std::string name() const override { return "none"; }
};

}  // namespace

std::unique_ptr<Strategy> make_none_strategy(const StrategyContext& ctx) {
  return std::make_unique<NoneStrategy>(ctx);
}

StrategyRegistration none_strategy_registration() {
  return {.name = "none",
          .description = "one process, no communication",
          .add_keys = nullptr,
          .make = make_none_strategy};
}

}  // namespace cohort::parallel
