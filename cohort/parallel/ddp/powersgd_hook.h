#pragma once
// PowerSGD (Vogels, Karimireddy, Jaggi, NeurIPS 2019) as a DDP comm hook, the algorithm of
// PyTorch's powerSGD_hook:
//
//   ddp.register_comm_hook(std::make_shared<PowerSgdHook>(PowerSgdOptions{.rank = 4}));
//
// or `ddp.compression = "powersgd"` with `ddp.powersgd_rank`, `ddp.powersgd_start_step`.
// Per bucket and step, each parameter seen as a matrix M [n, m] (conv weights as
// [out, in * kh * kw]):
//   1. M = grad + residual (error feedback);
//   2. P = M Q (Q [m, r]: from a seed shared by every rank, then the previous step's: warm start;
//      orthogonalized first, as PyTorch does, and a column that collapsed to zero redrawn);
//      one allreduce(sum) carries every P of the bucket and, in the same buffer, the parameters
//      that travel uncompressed (1-D ones, and those whose factors would not be 2x smaller);
//   3. P orthogonalized (Gram-Schmidt); Q = M^T P; a second allreduce carries the Qs;
//   4. the average is P Q^T / world; residual = M - P Q^T / world.
// Two allreduces of (n + m) r values replace one of n m. The first `start_step` steps are a
// plain allreduce (the paper's and PyTorch's warm-up: early gradients change fast).
// State: every parameter's Q (equal on every rank) and residual (per rank), in checkpoints.
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/parallel/ddp/comm_hook.h"
#include "cohort/parallel/ddp/compression_meter.h"

namespace cohort::parallel {

struct PowerSgdOptions {
  int rank = 1;                       // r, PyTorch's matrix_approximation_rank (>= 1)
  int64_t start_step = 10;            // plain allreduce for steps 1..start_step
  bool error_feedback = true;         // keep M - P Q^T and add it to the next gradient
  bool warm_start = true;             // start each step's power iteration from the last Q
  double min_compression_rate = 2.0;  // factorize only when (n + m) r * this <= n m
  uint64_t seed = 0;                  // Q's first draw: the same on every rank
};

class PowerSgdHook : public CommHook {
 public:
  // InvalidArgument for rank < 1, start_step < 0 or min_compression_rate <= 0.
  explicit PowerSgdHook(PowerSgdOptions options);
  ~PowerSgdHook() override;
  std::string name() const override { return "powersgd"; }
  comm::Work run(comm::ProcessGroup& group, const GradBucket& bucket) override;
  StrategyState state() const override;
  void load_state(const StrategyState& state) override;
  nlohmann::json take_interval_metrics() override { return meter_.take_interval(); }
  nlohmann::json summary_metrics() const override { return meter_.summary(name()); }

  // Parameter `name`'s current Q ([m, r], row-major) and residual (empty before use).
  std::vector<float> q_of(const std::string& name) const;
  std::vector<float> residual_of(const std::string& name) const;

 private:
  struct Matrix {
    std::vector<float> q, residual;
  };
  struct Entry;
  struct Plan;
  Plan& plan_for(const GradBucket& b);
  void start_q(const Entry& e, Matrix& m) const;
  void fill_normal(const Entry& e, std::span<float> q, int64_t stride, uint64_t stream) const;
  comm::Work send_p(comm::ProcessGroup& g, const GradBucket& b, Plan& plan);
  comm::Work send_q(comm::ProcessGroup& g, const GradBucket& b, Plan& plan);
  void finish(const GradBucket& b, Plan& plan, int world);

  PowerSgdOptions options_;
  std::map<std::string, Matrix> matrices_;    // by parameter: survives bucket rebuilds
  std::vector<std::unique_ptr<Plan>> plans_;  // by bucket index
  uint64_t steps_ = 0;                        // synced steps seen (counted at bucket 0)
  CompressionMeter meter_;
};

}  // namespace cohort::parallel
