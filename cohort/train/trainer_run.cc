// Trainer::run: the run directory, resume, checkpoints, and the end-of-run summary.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cohort/autograd/node.h"
#include "cohort/ckpt/checkpoint_aside.h"
#include "cohort/core/clock.h"
#include "cohort/core/logging.h"
#include "cohort/core/thread_pool.h"
#include "cohort/nn/layers.h"
#include "cohort/nn/models/gpt.h"
#include "cohort/train/checkpointing.h"
#include "cohort/train/elastic.h"
#include "cohort/train/fixed_batch.h"
#include "cohort/train/progress.h"
#include "cohort/train/run_dir.h"
#include "cohort/train/run_trace.h"
#include "cohort/train/scaling_baseline.h"
#include "cohort/train/trainer_state.h"

namespace cohort::train {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<ckpt::CheckpointManager> make_checkpoints(const Config& cfg,
                                                          const std::string& run_dir) {
  std::string dir = cfg.get_string("ckpt.dir");
  if (dir.empty()) dir = (fs::path(run_dir) / "checkpoints").string();
  return std::make_unique<ckpt::CheckpointManager>(ckpt::ManagerOptions{
      .dir = dir, .keep = int(cfg.get_int("ckpt.keep")), .async = cfg.get_bool("ckpt.async")});
}

// A fresh run must never resume, after a restart, from checkpoints an earlier run left in its
// checkpoint directory (a shared ckpt.dir): the chief moves them to a new generation folder
// <dir>.earlier/<n>/ (saying so) before training starts. Nothing there is replaced.
void move_stale_checkpoints(const ckpt::CheckpointManager& m) {
  std::vector<std::string> old = m.list();
  if (old.empty()) return;
  const std::string to = ckpt::move_aside(old, ckpt::earlier_root(m.dir()));
  std::printf(
      "cohort train: starting fresh; moved %zu checkpoint(s) of an earlier run from %s "
      "to %s (pass --resume auto to continue a run)\n",
      old.size(), m.dir().c_str(), to.c_str());
}

// After resuming from step N, checkpoints past N belong to the abandoned continuation: left in
// place, retention (newest by step) and a later `--resume auto` would pick them over this run's.
// They are moved aside like an earlier run's, not deleted: the user asked for neither.
void move_checkpoints_after(const ckpt::CheckpointManager& m, int64_t step) {
  std::vector<std::string> later;
  for (const std::string& d : m.list()) {
    long long n = -1;
    if (std::sscanf(fs::path(d).filename().c_str(), "step-%lld", &n) == 1 && n > step)
      later.push_back(d);
  }
  if (later.empty()) return;
  const std::string to = ckpt::move_aside(later, ckpt::earlier_root(m.dir()));
  for (const std::string& d : later)
    std::printf("cohort train: moved %s, written after step %ld by the run being resumed, to %s\n",
                d.c_str(), long(step), to.c_str());
}

std::string metrics_path(const Trainer::State& s) {
  // By the launcher's rank: a worker that joined a running elastic job (train/elastic_join.h)
  // takes the file of the worker it replaces, not that of its rank in the new world.
  const TrainWorld& w = *s.world;
  const int who = w.slots.empty() ? w.rank : w.slots[size_t(w.rank)];
  std::string name = w.is_chief() ? "metrics.jsonl" : detail::str("metrics.rank", who, ".jsonl");
  return (fs::path(s.run_dir) / name).string();
}

void print_start(const Trainer::State& s) {
  const std::string how = s.world->group ? s.world->group->backend_name() : "parameter servers";
  std::string workers =
      s.world->size > 1 ? detail::str(", ", s.world->size, " workers (", how, ")") : "";
  const std::string where = s.device.is_cpu() ? "" : " on " + s.device.str();
  const std::string products = s.precision ? ", bf16 products" : "";
  std::printf("cohort train: %s, %ld parameters%s, %ld steps, %d thread(s)%s%s%s, run dir %s\n",
              s.cfg.get_string("model.type").c_str(), long(s.model->num_parameters()),
              s.mesh ? " on rank 0 (its pipeline stage and tensor-parallel shard)" : "",
              long(s.total_steps), num_threads(), workers.c_str(), where.c_str(), products.c_str(),
              s.run_dir.c_str());
  const InitReport& w = s.init_weights;
  if (!w.path.empty()) {
    std::printf("cohort train: initial weights from %s: %d tensor(s)%s\n", w.path.c_str(), w.loaded,
                w.kept ? detail::str(", ", w.kept, " left at their initialisation").c_str() : "");
  }
}

}  // namespace

void Trainer::start_run() {
  State& s = *s_;
  bool chief = s.world->is_chief();
  s.run_dir = make_run_dir(s.cfg, s.world->is_chief());  // chosen in the constructor
  s.metrics_file = metrics_path(s);
  s.log.add(std::make_unique<metrics::JsonlFile>(s.metrics_file));
  if (s.stream) s.log.add(std::move(s.stream));
  s.ckpt = make_checkpoints(s.cfg, s.run_dir);
  if (s.joined_running_job) return;  // its state came from rank 0, not from a checkpoint
  // A strategy that restores the job itself (its lifecycle facet) says where training starts.
  const parallel::StrategyLifecycle* lifecycle = s.strategy->lifecycle();
  if (const int64_t at = lifecycle ? lifecycle->resume_step() : -1; at >= 0) {
    if (at > 0) return rejoin_at(at);
    // At step 0: a fresh start, whatever rank 0 saved.
    if (chief && s.cfg.get_bool("ckpt.enabled")) move_stale_checkpoints(*s.ckpt);
    return;
  }
  std::optional<ckpt::CheckpointData> d = find_resume_checkpoint(s);
  if (d) {
    s.resume_pos = s.pos = resume_position(s, *d, restore_checkpoint(s, *d));
    s.start_step = s.last_saved_step = s.step;
    s.last_saved_pos = s.resume_pos;
    if (chief) move_checkpoints_after(*s.ckpt, s.step);
    if (chief)
      std::printf("cohort train: resumed from step %ld (epoch %ld, batch %ld) in %s\n",
                  long(s.step), long(s.resume_pos.epoch), long(s.resume_pos.batch_in_epoch),
                  s.ckpt->dir().c_str());
  } else if (chief && s.cfg.get_bool("ckpt.enabled")) {
    move_stale_checkpoints(*s.ckpt);
  }
  if (s.world->distributed()) s.world->group->barrier();  // nobody saves before all resumed
}

// A worker restarted alone whose strategy resumes it where the job is (a parameter-server
// worker: the servers hold the model and its pushes so far): the data position of `step`,
// which the loader reaches deterministically, and the dropout counters of that position; no
// checkpoint of its own to load.
void Trainer::rejoin_at(int64_t step) {
  State& s = *s_;
  s.step = s.start_step = s.last_saved_step = step;
  s.resume_pos = s.pos = {step / s.steps_per_epoch, (step % s.steps_per_epoch) * s.grad_accum};
  s.last_saved_pos = s.pos;
  s.samples = step * s.grad_accum * s.batch;
  // Dropout draws mask k from its call counter: the micro-batches trained so far.
  const int64_t micro =
      s.pos.epoch * s.batches_per_epoch + s.pos.batch_in_epoch;  // per rank, like the loader
  std::map<std::string, uint64_t> counters = nn::dropout_counters(*s.model);
  for (auto& [name, count] : counters) count = uint64_t(micro);
  nn::set_dropout_counters(*s.model, counters);
  // Rank 0's own checkpoints past this step belong to the continuation that was abandoned.
  if (s.world->is_chief() && s.cfg.get_bool("ckpt.enabled")) move_checkpoints_after(*s.ckpt, step);
  const bool resumed = !s.cfg.get_string("run.resume").empty() && s.world->worker_restarts == 0;
  std::printf("cohort train: worker %d %s at step %ld (epoch %ld, batch %ld)\n", s.world->rank,
              resumed ? "resumed where the parameter servers' checkpoints are" : "rejoined the job",
              long(step), long(s.pos.epoch), long(s.pos.batch_in_epoch));
}

bool Trainer::prepare_checkpoint() {
  State& s = *s_;
  if (!s.cfg.get_bool("ckpt.enabled")) return false;
  if (s.step == s.last_saved_step && s.pos == s.last_saved_pos) return false;
  s.strategy->checkpoint().prepare_checkpoint();  // collective: every rank decided alike
  // Every rank: a strategy with per-rank state sends it to rank 0 here.
  s.pending_strategy = snapshot_strategy(s);
  s.last_saved_step = s.step;
  s.last_saved_pos = s.pos;
  return true;
}

void Trainer::write_checkpoint() {
  State& s = *s_;
  metrics::Span span(s.world->is_chief() ? s.tracer.get() : nullptr, "checkpoint write", "ckpt");
  if (s.world->is_chief()) {
    s.ckpt->save(capture_checkpoint(s, s.pos, s.pending_strategy));
    s.log.write(nlohmann::json{{"event", "checkpoint"}, {"step", s.step}, {"dir", s.ckpt->dir()}});
  }
  s.pending_strategy = {};
}

void Trainer::save_checkpoint() {
  if (prepare_checkpoint()) write_checkpoint();
  s_->energy.restart();  // checkpoints are not training steps
}

TrainSummary Trainer::run() {
  State& s = *s_;
  start_run();
  start_trace(s);
  try {
    return run_and_finish();
  } catch (...) {
    write_rank_trace(s);  // what led up to a failure is worth seeing; nobody merges it
    throw;
  }
}

TrainSummary Trainer::run_and_finish() {
  State& s = *s_;
  s.start = Clock::now();
  s.memory.start();
  nlohmann::json start{
      {"event", "start"},
      {"model", s.cfg.get_string("model.type")},
      {"parameters", s.model->num_parameters()},
      {"total_steps", s.total_steps},
      {"start_step", s.step},
      {"rank", s.world->rank},
      {"workers", s.world->size},
      {"threads", num_threads()},
      {"baseline_samples_per_s", s.world->is_chief() ? recorded_baseline(s) : -1.0}};
  if (s.energy.on()) start["energy_source"] = s.energy.source();
  s.log.write(start);
  if (s.world->is_chief()) print_start(s);
  std::string mode = s.world->is_chief() ? s.cfg.get_string("run.progress") : "none";
  Progress p(progress_mode(mode), s.total_steps, s.cfg.get_int("run.log_every"));
  p.set_time_limit(s.cfg.get_float("train.time_limit_s"));
  s.energy.restart();  // start-up is not training
  if (s.data.is_text) {
    run_text(p);
  } else {
    run_epochs(p);
  }
  p.finish();
  finish_energy(s);                // collective, while every rank still runs collectives
  if (s.last_eval.samples == 0) {  // resumed with no step left: still report a real evaluation
    finish_strategy_training(*s.strategy);
    s.last_eval = evaluate();
  }
  // Everyone is done with collectives (the strategy's for the final checkpoint included); rank 0
  // may host the store, so the others must not need it after this. Then rank 0 alone writes the
  // final checkpoint, however long that takes: nobody waits for it under a collective deadline.
  bool final_checkpoint = prepare_checkpoint();
  if (!s.world->is_chief()) write_rank_trace(s);  // rank 0 merges after this barrier
  if (s.world->distributed()) s.world->group->barrier();
  if (final_checkpoint) write_checkpoint();
  if (s.ckpt) s.ckpt->wait();
  announce_job_done(s);  // elastic: for launchers whose own workers were lost (docs/elastic.md)
  if (s.world->is_chief()) write_rank_trace(s);  // with the final checkpoint's write
  merge_run_trace(s);
  return finish_summary();
}

TrainSummary Trainer::finish_summary() {
  State& s = *s_;
  TrainSummary sum;
  sum.steps = s.step;
  sum.train_seconds = s.train_seconds;
  sum.workers = s.world->size;
  // Every data-parallel replica trains on its own samples (the pieces of one replica on the same).
  sum.samples_per_s = double(s.samples) * samples_scale(s) / std::max(s.train_seconds, 1e-9);
  sum.comm_hidden = s.metrics.hidden_share();
  sum.eval = s.last_eval;
  sum.run_dir = s.run_dir;
  if (s.world->is_chief()) sum.scaling_efficiency = record_or_compare_scaling(s, sum);
  int64_t n = s.cfg.get_int("train.sample_bytes");
  if (auto* gpt = dynamic_cast<nn::GPT*>(s.model.get()); gpt && n > 0 && s.world->is_chief()) {
    autograd::NoGradGuard ng;
    gpt->eval();
    nn::GenerateOptions g;
    g.max_new_tokens = n;
    g.temperature = s.cfg.get_float("train.sample_temperature");
    g.seed = uint64_t(s.cfg.get_int("run.seed"));
    sum.sample = gpt->generate(s.cfg.get_string("train.sample_prompt"), g);
    std::printf("--- sample ---\n%s\n--------------\n", sum.sample.c_str());
  }
  write_summary(s, sum, seconds_since(s.start));
  return sum;
}

}  // namespace cohort::train
