#pragma once
// DDP: synchronous data parallelism, like torch.nn.parallel.DistributedDataParallel.
//
//   DDP ddp(model, pg, {.bucket_bytes = 4 << 20});
//   Tensor loss = nn::cross_entropy(ddp(x), y);
//   opt.zero_grad(); loss.backward();   // buckets allreduce during backward; when backward()
//   opt.step();                          // returns, every grad is the average across ranks
//
// Construction is collective: it checks that every rank has the same parameters (names,
// shapes, dtypes), copies rank 0's parameters (and buffers) to every rank, and hooks each
// parameter's grad-ready event. From then on every backward through the model averages the
// gradients across ranks, overlapping the allreduce of early buckets with the rest of backward
// (see reducer.h for the protocol and docs/ddp.md for the guide).
//
// Contract: every rank runs the same model and the same number of synced backward passes, in
// the same order. Parameters are float32. Results are bit-identical on every rank and across
// runs (the allreduce's reduction order is fixed).
#include <memory>

#include "cohort/comm/process_group.h"
#include "cohort/nn/module.h"
#include "cohort/parallel/ddp/comm_hook.h"
#include "cohort/parallel/ddp/ddp_options.h"

namespace cohort::metrics {
class Tracer;
}

namespace cohort::parallel {

class Reducer;

class DDP {
 public:
  // Collective. InvalidArgument (on every rank) when the ranks' parameter lists differ (names
  // the first differing parameter and the ranks) or a parameter is not float32.
  DDP(nn::Module& module, std::shared_ptr<comm::ProcessGroup> group, DdpOptions options = {});
  ~DDP();  // waits for in-flight buckets (never throws); hooks become no-ops
  DDP(const DDP&) = delete;
  DDP& operator=(const DDP&) = delete;

  Tensor operator()(const Tensor& x) { return module_.forward(x); }
  nn::Module& module() { return module_; }
  comm::ProcessGroup& group() { return *group_; }
  const DdpOptions& options() const { return options_; }

  // RAII: backward passes inside do not communicate; gradients accumulate locally in .grad;
  // the next synced backward allreduces the accumulated sum (averaged over ranks), as torch's
  // ddp.no_sync(). Every rank must use it around the same passes.
  class NoSync {
   public:
    ~NoSync();
    NoSync(NoSync&& other) noexcept;
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;

   private:
    friend class DDP;
    explicit NoSync(std::shared_ptr<Reducer> reducer);
    std::shared_ptr<Reducer> reducer_;
    bool previous_ = true;
  };
  NoSync no_sync();

  // Replaces the default averaging allreduce with `hook` (comm_hook.h), as torch's
  // register_comm_hook. Once, before the first backward; InvalidArgument otherwise. Every
  // rank registers an equivalent hook.
  void register_comm_hook(std::shared_ptr<CommHook> hook);
  CommHook& comm_hook() const;

  // Statistics of the last synced backward (zeros before the first).
  const DdpStepStats& last_step() const;
  // Number of buckets in the current assignment (rebuilt after the first synced step).
  size_t num_buckets() const;
  // Spans of each bucket's communication go to `tracer` (null: none; see Reducer).
  void set_tracer(metrics::Tracer* tracer);

  // Collective. Hashes every parameter and compares across ranks; InvalidArgument naming the
  // rank(s) whose parameters differ from rank 0 and the first differing parameter. Runs
  // automatically every options.check_every synced steps (at the end of that backward).
  void check_parameters_in_sync();

 private:
  nn::Module& module_;
  std::shared_ptr<comm::ProcessGroup> group_;
  DdpOptions options_;
  nn::NamedTensors params_;  // every parameter, once each (tied weights deduplicated)
  std::shared_ptr<Reducer> reducer_;
  bool hook_registered_ = false;
};

}  // namespace cohort::parallel
