#pragma once
// ZeroEngine: the machinery behind the "zero" strategy (zero_strategy.h), after ZeRO
// (Rajbhandari et al., SC 2020) and PyTorch's FSDP.
//
// Parameters are grouped in units (zero_units.h). Each unit's parameters are laid end to end in
// one flat buffer padded to world * S elements (ckpt::FlatLayout: rank r owns [r*S, (r+1)*S)),
// and every parameter becomes a view into that buffer, so one collective moves a whole unit.
// Rank r keeps the optimizer state of its shard only: a second optimizer of the user's kind
// (Optimizer::make_like) steps one flat "parameter" per unit, its shard.
//
//   stage 1: backward allreduces (average) each unit's flat gradient as soon as backward has
//            produced all of it (overlapped, as DDP); each .grad is a view into that buffer;
//            step() updates the rank's shard and allgathers the units' parameters.
//   stage 2: as stage 1, but each unit's gradient is reduce-scattered: the rank keeps only its
//            shard, and the flat gradient is freed once the reduction is done (.grad is left
//            undefined).
//   stage 3: as stage 2, and the flat parameters too live only while their module runs: each
//            unit module's forward and backward (observed through autograd scopes) gathers
//            them first, the next unit's gather is started meanwhile (prefetch), and they are
//            freed when the module is done. The rank's shard is then a tensor of its own.
//
// Redundant (options.redundant, set by in-place recovery: elastic.min_workers, docs/elastic.md):
// rank r also keeps and steps a copy of its neighbour's shard (rank r+1 mod N: its parameters
// and optimizer state, as Gemini keeps a peer's state in memory), so the state of every shard
// lives on two ranks. Stage 1's allreduce gives every rank its neighbour's averaged gradient;
// stages 2 and 3 pass each shard's to its keeper after the reduce-scatter (one batch of sends
// to rank - 1, 1/N of the gradient), so the keeper steps the copy on the owner's very bits. The
// copy costs S more parameters, gradients and optimizer slots per unit and a second shard
// optimizer step. consolidate() (zero_elastic.cc) rebuilds the full state over the survivors
// after a rank was lost.
// Gradients are averaged over ranks, so a step equals one process stepping on the combined
// batch. Every rank must run the same units in the same order (same model, same passes).
// Threads: everything runs on the thread that owns the strategy (hooks and scope callbacks run
// on the thread that runs forward/backward); the communicator's worker thread touches only the
// buffers of launched collectives, which nothing else touches until their Work is done.
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cohort/autograd/scope.h"
#include "cohort/ckpt/flat_layout.h"
#include "cohort/ckpt/sharded.h"
#include "cohort/comm/process_group.h"
#include "cohort/optim/optimizer.h"
#include "cohort/parallel/bucketing.h"
#include "cohort/parallel/strategy.h"
#include "cohort/parallel/zero/zero_units.h"

namespace cohort::parallel {

// Elements [begin, begin + n) of a 1-D flat buffer, as a view of it (no copy).
inline Tensor range_of(const Tensor& flat, int64_t begin, int64_t n) {
  return flat.as_strided({n}, {1}, flat.offset() + begin);
}

struct ZeroOptions {
  int stage = 1;
  double unit_mb = 1.0;  // unit size cap (zero_units.h), MiB of float32 parameters
  bool prefetch = true;  // stage 3: gather the next unit while the current one computes
  std::chrono::milliseconds timeout{0};  // per collective; 0: the group's default
  bool redundant = false;                // keep and step the neighbour's shard too (above)
};

class ZeroEngine : public std::enable_shared_from_this<ZeroEngine> {
 public:
  using Clock = std::chrono::steady_clock;
  struct Unit {
    UnitPlan plan;
    ckpt::FlatLayout layout;  // the unit's parameters over `world` shards
    Tensor flat;              // [world * S] full parameters (stage 3: released when unused)
    Tensor shard;             // [S] this rank's parameters, the shard optimizer's parameter
    Tensor flat_grad;         // [world * S] (stages 2, 3: released between reductions)
    Tensor shard_grad;        // [S] the averaged gradient of the shard
    Tensor buddy;             // [S] redundant: rank+1's shard (parameters), stepped here too
    Tensor buddy_grad;        // [S] its averaged gradient
    comm::Work gather;        // stage 3 (its reduction's Work is the bucketing engine's)
    bool gathered = true;     // stage 3: flat holds the full parameters
    int in_use = 0;           // stage 3: open scopes of its module
  };

  // Collective: checks that every rank has the same parameters, copies rank 0's parameters
  // and buffers everywhere, and shards. `group` may be null (one process).
  ZeroEngine(nn::Module& model, const optim::Optimizer& user_optimizer,
             std::shared_ptr<comm::ProcessGroup> group, ZeroOptions options);
  ~ZeroEngine();
  void install();  // grad-ready hooks and, for stage 3, the module scopes (after construction)

  void set_sync(bool on) { grads_->set_enabled(on); }
  double clip_grad_norm(double max_norm);
  void step(double lr);
  void zero_grad();
  void drain() noexcept;         // waits for every collective in flight, ignoring errors
  void abandon_pass() noexcept;  // backward threw before its end-of-pass callback ran
  // Stage 3: every unit's full parameters on every rank, until its module next runs.
  void gather_all();
  // Stage 3, the trainer's timeline: scope callbacks of a traced module are passed on.
  void chain_scope_observers();

  // The optimizer's state in checkpoints (zero_checkpoint.cc; Strategy's contract).
  std::vector<ckpt::TensorPiece> optimizer_pieces() const;
  std::map<std::string, double> optimizer_scalars() const;
  void load_optimizer(const ckpt::ShardedView& view, const std::map<std::string, double>& scalars);
  // The same from a plain optimizer's state of the whole model (names as export_state gives).
  void load_full_optimizer(const optim::OptimizerState& state);
  // Stage 3: keep every unit gathered from now on (after training: the final evaluation, the
  // checkpoint and rank 0's text sample use the full model, and rank 0 alone must not start a
  // collective).
  void hold_gathered();
  // A checkpoint's full parameters into the units (stage 3: into the shards; no communication).
  void load_model(const nn::StateDict& state);
  void check_model_state(const nn::StateDict& state) const;

  // In-place recovery (zero_elastic.cc), collective over `group`, the members of the new world
  // in the order of `members`, their ranks in this engine's world: the full parameters go back
  // into the model's parameters (each its own storage again, so a new engine can shard them
  // over another world) and the full optimizer state is returned in a plain optimizer's names,
  // both assembled from the members' shards and, for a rank not among them, the copy its
  // neighbour keeps (options.redundant). IoError naming them when a rank and its neighbour below
  // were both lost (that shard lived on no member), before any communication. The engine is
  // spent afterwards: only its destructor may follow.
  optim::OptimizerState consolidate(comm::ProcessGroup& group, const std::vector<int>& members);
  // True between a step's shard update and the end of its parameter allgather (stages 1, 2):
  // a step that failed there has updated every shard; recovery counts it as done.
  bool update_unfinished() const { return update_unfinished_; }

  int stage() const { return options_.stage; }
  int world() const { return world_; }
  int rank() const { return rank_; }
  const std::vector<Unit>& units() const { return units_; }
  optim::Optimizer& shard_optimizer() { return *shard_opt_; }
  double comm_s() const { return comm_s_; }
  double exposed_s() const { return exposed_s_; }

 private:
  class Gatherer;
  void build_unit(UnitPlan plan);
  void shard_parameters(Unit& u);
  void make_shard_optimizer(const optim::Optimizer& user_optimizer);
  int buddy_rank() const { return (rank_ + 1) % world_; }
  bool redundant() const { return options_.redundant && world_ > 1; }
  void hand_off_shard_grads();  // redundant stages 2, 3 (zero_grads.cc)
  // Gradients (zero_grads.cc): a policy on the bucketing engine, one bucket per unit.
  void make_grads();  // the engine and its plan (constructor); hooks come with install()
  Unit& unit_of_bucket(size_t b) { return units_[units_.size() - 1 - b]; }
  comm::Work& reduction(size_t unit) { return grads_->work(units_.size() - 1 - unit); }
  void take_grad(Unit& u, size_t index);
  comm::Work launch(Unit& u);
  void finalize();
  void wait_reductions();
  void free_reduced();
  void bound_reductions_in_flight();
  static constexpr size_t kMaxReductionsInFlight = 2;
  // Parameters, stage 3 (zero_gather.cc).
  void install_scopes();
  void use_unit(size_t unit, autograd::Pass pass);
  void done_with_unit(size_t unit);
  void start_gather(Unit& u);
  void finish_gather(Unit& u);
  void release(Unit& u);
  void release_idle();  // every unit no module is using (prefetched but not used, gather_all)
  void allgather_parameters();  // stages 1, 2, after the step
  double unit_step(const Unit& u, const std::map<std::string, double>& scalars) const;
  std::optional<Tensor> read_slot(const ckpt::ShardedView& view, const Unit& u,
                                  const std::string& slot, int rank) const;
  optim::OptimizerState shard_state(const ckpt::ShardedView& view,
                                    const std::map<std::string, double>& scalars, int rank) const;
  // The shard optimizer's name of a unit (its module's path; "<root>" for the model itself).
  static std::string unit_key(const Unit& u) {
    return u.plan.name.empty() ? "<root>" : u.plan.name;
  }
  // Redundant: the neighbour's shard from the full parameters in u.flat.
  void copy_buddy_from_flat(Unit& u) {
    const int64_t S = u.layout.shard_size();
    if (redundant()) u.buddy.copy_(range_of(u.flat, buddy_rank() * S, S));
  }

  nn::Module& model_;
  std::shared_ptr<comm::ProcessGroup> group_;
  ZeroOptions options_;
  int world_ = 1, rank_ = 0;
  std::vector<Unit> units_;
  std::unique_ptr<optim::Optimizer> shard_opt_;
  std::unique_ptr<optim::Optimizer> buddy_opt_;  // redundant: steps the neighbour's shards
  bool update_unfinished_ = false;
  std::shared_ptr<Gatherer> gatherer_;
  std::unordered_map<std::string, size_t> unit_of_module_;
  bool hold_ = false;  // hold_gathered()
  // Bucket b is unit N-1-b: launched from the last unit backwards (backward's order).
  std::shared_ptr<GradBucketing> grads_;
  std::vector<std::pair<size_t, size_t>> param_at_;  // engine parameter -> (unit, index)
  double comm_s_ = 0, exposed_s_ = 0;
  Clock::time_point first_launch_;  // this pass's first reduction
};

}  // namespace cohort::parallel
