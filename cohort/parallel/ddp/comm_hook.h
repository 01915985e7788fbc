#pragma once
// DDP communication hooks (torch's DistributedDataParallel.register_comm_hook): what DDP does
// with a bucket of gradients once backward has produced all of them. The default hook
// averages it with one allreduce; a hook may compress it, run several collectives
// (Work::then), or keep state across steps (error-feedback residuals, PowerSGD's Q), which
// DDP's strategy saves in checkpoints.
//
//   class HalfPrecisionHook : public parallel::CommHook {
//     comm::Work run(comm::ProcessGroup& g, const parallel::GradBucket& b) override { ... }
//   };
//   ddp.register_comm_hook(std::make_shared<HalfPrecisionHook>());  // before the first backward
//
// Contract: run() is called on the thread that runs backward, for buckets in index order on
// every rank, and issues the same collectives on every rank. The Work it returns completes
// when bucket.data holds the averaged gradient; until then the hook owns bucket.data. The
// GradBucket stays valid until that Work is done, so continuations may capture it by
// reference. A continuation runs when DDP waits for the bucket (Work::then); after a failed
// backward DDP only waits for what was issued, without running continuations.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "cohort/comm/process_group.h"
#include "cohort/parallel/strategy.h"

namespace cohort::parallel {

struct GradBucket {
  size_t index = 0;  // 0 .. buckets - 1, in launch order
  size_t num_buckets = 0;
  float* data = nullptr;  // the bucket's flat gradients; the result goes here
  size_t numel = 0;
  std::vector<std::string> parameters;       // names, in their order inside `data`
  std::vector<size_t> offsets;               // each parameter's first element in `data`
  std::vector<std::vector<int64_t>> shapes;  // each parameter's shape (PowerSGD's matrices)
  std::chrono::milliseconds timeout{0};      // per collective (DdpOptions::timeout; 0: group's)
};

class CommHook {
 public:
  virtual ~CommHook() = default;
  virtual std::string name() const = 0;
  virtual comm::Work run(comm::ProcessGroup& group, const GradBucket& bucket) = 0;
  // State kept across steps, saved with checkpoints (from rank 0, see StrategyState).
  virtual StrategyState state() const { return {}; }
  virtual void load_state(const StrategyState& state) {}
  // Metrics of its own (compression: bytes, ratio, encode/decode time), merged into the step
  // records (over the steps since the last call) and the summary (over the run).
  virtual nlohmann::json take_interval_metrics() { return nlohmann::json::object(); }
  virtual nlohmann::json summary_metrics() const { return nlohmann::json::object(); }
};

// The default: allreduce with ReduceOp::avg, in place.
class AllreduceHook : public CommHook {
 public:
  std::string name() const override { return "allreduce"; }
  comm::Work run(comm::ProcessGroup& group, const GradBucket& bucket) override;
};

}  // namespace cohort::parallel
