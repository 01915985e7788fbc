#include "cohort/parallel/strategy.h"

#include "cohort/ops/ops.h"
#include "cohort/optim/clip.h"
#include "cohort/parallel/builtin_strategies.h"

namespace cohort::parallel {

// Each loss is weighted by its micro-batch's share of the step's samples so that the gradient is
// the mean over all of them (a short last micro-batch counts for its samples: the step equals
// one batch of their total, whatever the split); the strategy communicates in the last backward
// (DDP) or after the step.
Strategy::Strategy(const StrategyContext& ctx)
    : model_(ctx.model), optimizer_(ctx.optimizer), group_(ctx.group) {
  replicated_ = std::make_unique<ReplicatedCheckpoint>(ctx);
}

Strategy::~Strategy() = default;

// A strategy offers a facet by deriving from it, so finding one is a cast: no registration to
// forget, and no virtual method on the core per facet.
StrategyCheckpoint& Strategy::checkpoint() {
  if (auto* own = dynamic_cast<StrategyCheckpoint*>(this)) return *own;
  return *replicated_;
}

StrategyMetrics* Strategy::metrics() {
  return dynamic_cast<StrategyMetrics*>(this);
}

StrategyLifecycle* Strategy::lifecycle() {
  return dynamic_cast<StrategyLifecycle*>(this);
}

void Strategy::set_tracer(metrics::Tracer* tracer) {
  tracer_ = tracer;
  if (StrategyMetrics* m = metrics()) m->trace_to(tracer);
}

ForwardBackwardResult Strategy::forward_backward(const std::vector<MicroBatch>& micro,
                                                 const LossFn& loss_of) {
  using Clock = std::chrono::steady_clock;
  ForwardBackwardResult r;
  for (size_t m = 0; m < micro.size(); ++m) {
    auto t0 = Clock::now();
    // A pass of weight 0 only keeps collectives in step (ZeRO-3's lockstep): in eval mode, so
    // that no batch-norm statistic or dropout counter moves, and its loss counts for nothing.
    const bool padding = micro[m].weight == 0;
    if (padding) model_.eval();
    Tensor loss = loss_of(forward(micro[m].x), micro[m].y);
    auto t1 = Clock::now();
    if (!padding) r.loss += double(loss.item<float>()) * micro[m].weight;
    if (micro[m].weight != 1) loss = ops::mul_scalar(loss, micro[m].weight);
    backward(loss, /*sync=*/m + 1 == micro.size());
    if (padding) model_.train();
    auto t2 = Clock::now();
    r.forward_s += std::chrono::duration<double>(t1 - t0).count();
    r.backward_s += std::chrono::duration<double>(t2 - t1).count();
    r.phases.push_back({"forward", t0, t1});
    r.phases.push_back({"backward", t1, t2});
  }
  return r;
}

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
  std::string name() const override { return kSingleProcessStrategy; }
};

}  // namespace

std::unique_ptr<Strategy> make_none_strategy(const StrategyContext& ctx) {
  return std::make_unique<NoneStrategy>(ctx);
}

StrategyRegistration none_strategy_registration() {
  return {.name = kSingleProcessStrategy,
          .description = "one process, no communication",
          .add_keys = nullptr,
          .make = make_none_strategy};
}

}  // namespace cohort::parallel
