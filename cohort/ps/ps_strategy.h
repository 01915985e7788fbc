#pragma once
// The "ps" strategy (parallel.strategy = "ps"): workers push gradients to parameter servers,
// which own the model (server.h), and pull the updated parameters back. In BSP step t's pull
// returns once every worker's push of step t is applied, so N workers with batch B train
// exactly like one process with batch N*B (the servers average the gradients); ASP and SSP
// answer at once or once the slowest worker is close enough (ps.mode, server.h).
//
// Per step (the trainer's step()): flatten every parameter's .grad in layout order
// (partition.h), PsWorker::push_pull (one request per server, all in flight at once), copy the
// values back into the parameters. At construction: connect, hello (the model check), pull, so
// that every worker starts from the servers' values. The local optimizer only clears grads.
//
// ps.overlap (default on; push_overlap.h): the synced backward (the last micro-batch's) already
// pushes each server's range from the grad-ready hook that completes it, and step() pushes the
// ranges that did not complete, waits for every answer and copies the values back. The same
// bytes go to the same servers; only when they leave changes. Off with optim.clip_grad_norm > 0
// (clipping needs every gradient before any push): then step() pushes everything, as with
// ps.overlap = false.
//
// optim.clip_grad_norm: each worker clips its own gradient (the global L2 norm over all of its
// parameters, after its micro-batches are accumulated) before pushing it, so the servers
// average clipped gradients. DDP instead clips the averaged gradient; with one worker (or
// workers whose norms stay under the bound) the two are the same.
// shutdown() says goodbye to the servers, unless an exception is unwinding (a failing worker:
// the servers then name it as having left without goodbye).
#include <memory>
#include <vector>

#include "cohort/parallel/strategy_registry.h"
#include "cohort/ps/push_overlap.h"
#include "cohort/ps/worker.h"

namespace cohort::ps {

// The strategy's registered name (parallel.strategy).
inline constexpr char kStrategyName[] = "ps";

// The [ps] consistency keys, checked (InvalidArgument naming the key) for `num_workers`.
Consistency consistency_from_config(const Config& cfg, int num_workers);
// Whether run.resume asks to resume the whole job ("auto": the servers restore their
// checkpoints, the workers go on where the servers are). InvalidArgument for another value (a
// checkpoint path: each server has its own directory).
bool resumes_job(const Config& cfg);
// ps.shared_memory (true where the registry does not declare it).
bool shared_memory_from_config(const Config& cfg);

enum class Transfer { kPushPull, kPull };

// A worker's view of its pushes (the servers' replies): staleness (max, mean, histogram of
// 0..7 and 8+), lead over the slowest worker, time its pulls were held by SSP, dropped pushes;
// and its traffic: push_bytes (gradients sent), pull_bytes (values received, by push_pull and
// by the initial pull; compressed: the message bytes), and the seconds spent in push_pull
// (push_pull_s: the round trip, waiting for the servers included) and in pull (pull_s).
struct PsMetrics {
  int64_t pushes = 0, staleness_max = 0, lead_max = 0, dropped = 0;
  double staleness_sum = 0, blocked_s = 0;
  std::vector<uint64_t> hist;
  uint64_t push_bytes = 0, pull_bytes = 0;
  double push_pull_s = 0, pull_s = 0;
  // ps.overlap: server pushes started during backward, and the wall time their round trips ran
  // while backward was still computing (the push time hidden behind it).
  int64_t pushes_in_backward = 0;
  double push_overlap_s = 0;
  // Compressed pushes (ps.compression): the f32 bytes pushed before encoding, encode seconds.
  uint64_t raw_push_bytes = 0;
  double encode_s = 0;
  void add(const PushReply& r);
  void add_transfer(const TransferStats& t, double seconds, Transfer kind);
  void add_overlap(const OverlapStep& o);
  nlohmann::json json(bool with_hist) const;
};

class PsStrategy : public parallel::Strategy,
                   public parallel::StrategyMetrics,
                   public parallel::StrategyLifecycle {
 public:
  PsStrategy(const parallel::StrategyContext& ctx, WorkerOptions options);
  std::string name() const override { return kStrategyName; }
  void backward(const Tensor& loss, bool sync) override;
  double clip_grad_norm(double max_norm) override;
  void step() override;
  parallel::StrategyStats last_stats() const override { return stats_; }
  nlohmann::json take_interval_metrics() override;
  nlohmann::json summary_metrics() const override;
  void shutdown() noexcept override;
  // Rank 0 waits for every worker to finish and evaluates the servers' final parameters (in
  // ASP/SSP its own replica misses the slower workers' last pushes); the others say bye.
  void finish_training() override;
  // The servers restore the job: a worker restarted alone rejoins where they are, a fresh or
  // resumed job starts at their step (0 without server checkpoints).
  int64_t resume_step() const override { return step_; }

 private:
  // Gathers server i's range of the gradient and starts its push (ps.overlap).
  void start_push(int i);
  TransferStats push_pull_at_once(OverlapStep* o);
  TransferStats push_pull_overlapped(OverlapStep* o);

  NamedTensors params_;
  Layout layout_;
  std::unique_ptr<PsWorker> worker_;
  // The flat gradient and values: the worker's shared area when it has one (the servers on
  // this host read and write them there), else own_.
  std::vector<float> own_;
  float* grads_ = nullptr;
  float* values_ = nullptr;
  int64_t step_ = 0;
  int rank_ = 0;
  parallel::StrategyStats stats_;
  Mode mode_;
  compress::Method compression_ = compress::Method::kNone;
  PsMetrics interval_, run_;
  std::shared_ptr<PushOverlap> overlap_;  // null: push everything in step()
};

// The registration (name "ps", the [ps] keys). train/ registers it.
parallel::StrategyRegistration ps_strategy_registration();

}  // namespace cohort::ps
