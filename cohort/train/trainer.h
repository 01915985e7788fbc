#pragma once
// The loop `cohort train` runs: builds the model, data, optimizer and schedule from a Config,
// trains, evaluates after each epoch (and every train.eval_every steps), appends metrics to
// <run dir>/metrics.jsonl and prints progress and a final summary.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cohort/core/config.h"
#include "cohort/nn/module.h"
#include "cohort/rendezvous/bootstrap.h"

namespace cohort::data {
struct Batch;
}

namespace cohort::train {

class Progress;

struct EvalResult {
  double loss = 0;       // mean cross-entropy (nats; per byte for text)
  double accuracy = -1;  // classification only; -1 for language models
  int64_t samples = 0;
};

struct TrainSummary {
  int64_t steps = 0;
  double train_seconds = 0;  // training only, evaluations excluded
  double samples_per_s = 0;  // all workers together
  int workers = 1;
  double comm_hidden = -1;         // share of allreduce time hidden behind backward; -1: none
  double scaling_efficiency = -1;  // vs a recorded 1-worker run of the same setup; -1: none
  EvalResult eval;                 // the last evaluation
  std::string run_dir;
  std::string sample;  // GPT: generated text, empty otherwise
};

class Trainer {
 public:
  // Validates the combination of keys (e.g. model.type = "gpt" needs data.dataset = "text")
  // and builds everything; loading data may throw IoError naming the file. When `env` holds a
  // launcher's variables (`cohort run`, torchrun, mpirun, srun) this process joins that job as
  // one data-parallel worker (collective: every worker constructs its Trainer).
  explicit Trainer(const Config& cfg,
                   const rendezvous::EnvMap& env = rendezvous::snapshot_environment());
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains (resuming per run.resume), evaluates, checkpoints; returns the summary.
  TrainSummary run();
  EvalResult evaluate();
  nn::Module& model();

  struct State;  // trainer_state.h

 private:
  // One optimizer step over `micro` (its micro-batches); batch_index is the last one's.
  bool train_step(const std::vector<data::Batch>& micro, int64_t epoch, int64_t batch_index,
                  double data_s, Progress& p);
  void start_run();
  TrainSummary run_and_finish();  // run() after start-up; trainer_run.cc
  void rejoin_at(int64_t step);   // trainer_run.cc
  // Every rank: whether this position still needs a checkpoint; if so the strategy makes the
  // ranks agree (collective). Then rank 0 writes it. save_checkpoint does both.
  bool prepare_checkpoint();
  void write_checkpoint();
  void save_checkpoint();
  void run_epochs(Progress& p);
  // The epochs from s_->resume_pos on; run_epochs calls it again after in-place recovery.
  void run_epochs_from_resume(Progress& p);
  void run_text(Progress& p);
  void run_text_steps(Progress& p);  // from s_->step on; run_text calls it again likewise
  // Runs `train`: true when it ran to its end, false when the membership changed under it
  // (workers joined, or the survivors of a lost peer recovered in place: train/elastic.h).
  bool ran_to_the_end(Progress& p, const std::function<void()>& train);
  TrainSummary finish_summary();
  std::unique_ptr<State> s_;
};

}  // namespace cohort::train
