#pragma once
// Gradient compression as a DDP comm hook (comm_hook.h), with the codecs of compress/:
//
//   ddp.register_comm_hook(std::make_shared<CompressionHook>(
//       CompressionOptions{.method = compress::Method::kTopK, .topk_ratio = 0.01}));
//
// or, through the trainer, `ddp.compression = "topk"` (ddp_strategy.cc; docs/compression.md).
// Per bucket and step:
//   fp16, bf16: cast scale * g (scale = 1/world, so the sum is the average and cannot exceed
//               the largest gradient: no fp16 overflow unless one scaled value does, and that
//               saturates at 65504), allreduce(sum) in 16 bits, cast back. Stateless.
//   randomk:    k = topk_ratio * numel indices from a seed and the step, the same on every rank,
//               so the k values are allreduced (sum) in place of the bucket.
//   topk:       each rank its own k largest |g|: sparse exchange, every rank's (index, value)
//               pairs by allgather, summed locally; or dense exchange, the pairs scattered into
//               zeros and allreduced. kAuto takes the sparse one when it moves fewer bytes:
//               2 * k * world < numel (8 bytes per pair from each rank against ~2 * 4 * numel of
//               a ring allreduce).
// With error feedback (topk, randomk; on by default) each rank keeps, per parameter, what it
// has not sent yet and adds it to the next step's gradient: the residuals differ between ranks,
// so state() is marked per_rank (checkpoints refuse it for now; docs/compression.md).
#include <map>
#include <memory>

#include "cohort/compress/compressor.h"
#include "cohort/parallel/ddp/comm_hook.h"
#include "cohort/parallel/ddp/compression_meter.h"

namespace cohort::parallel {

enum class SparseExchange : uint8_t { kAuto, kSparse, kDense };

struct CompressionOptions {
  compress::Method method = compress::Method::kFp16;
  double topk_ratio = 0.01;    // topk, randomk: k = max(1, round(ratio * bucket numel))
  bool error_feedback = true;  // topk, randomk, signsgd
  SparseExchange exchange = SparseExchange::kAuto;  // topk
  uint64_t seed = 0;    // randomk: the same on every rank; qsgd: its rounding draws
  int qsgd_levels = 8;  // qsgd: s levels, in [1, 127]
};

class CompressionHook : public CommHook {
 public:
  // InvalidArgument for Method::kNone (use the default hook) or a ratio outside (0, 1].
  explicit CompressionHook(CompressionOptions options);
  ~CompressionHook() override;
  std::string name() const override;  // the method: "fp16", "topk", ...
  comm::Work run(comm::ProcessGroup& group, const GradBucket& bucket) override;
  StrategyState state() const override;
  void load_state(const StrategyState& state) override;
  nlohmann::json take_interval_metrics() override;
  nlohmann::json summary_metrics() const override;

  bool keeps_residuals() const { return error_feedback_; }
  // The residual of parameter `name` (empty before its first step or without error feedback).
  std::vector<float> residual_of(const std::string& name) const;

 private:
  struct BucketState;
  BucketState& state_for(const GradBucket& b);
  void stash_residuals();
  bool sparse_path(size_t numel, int world) const;
  comm::Work exchange(comm::ProcessGroup& g, const GradBucket& b, BucketState& s,
                      const compress::CodecContext& ctx);

  CompressionOptions options_;
  std::unique_ptr<compress::Compressor> codec_;
  bool error_feedback_;
  std::vector<std::unique_ptr<BucketState>> buckets_;
  // Residuals per parameter between two bucket layouts (DDP rebuilds its buckets after the
  // first step) or from a checkpoint, taken up by the next bucket that holds the parameter.
  std::map<std::string, std::vector<float>> stashed_;
  CompressionMeter meter_;
};

}  // namespace cohort::parallel
