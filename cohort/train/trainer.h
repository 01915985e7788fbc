#pragma once
// The loop `cohort train` runs: builds the model, data, optimizer and schedule from a Config,
// trains, evaluates after each epoch (and every train.eval_every steps), appends metrics to
// <run dir>/metrics.jsonl and prints progress and a final summary.
#include <memory>
#include <string>

#include "cohort/core/config.h"
#include "cohort/nn/module.h"

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
  double samples_per_s = 0;
  EvalResult eval;  // the last evaluation
  std::string run_dir;
  std::string sample;  // GPT: generated text, empty otherwise
};

class Trainer {
 public:
  // Validates the combination of keys (e.g. model.type = "gpt" needs data.dataset = "text")
  // and builds everything; loading data may throw IoError naming the file.
  explicit Trainer(const Config& cfg);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  TrainSummary run();
  EvalResult evaluate();
  nn::Module& model();

  struct State;  // trainer_state.h

 private:
  bool train_step(const data::Batch& b, int64_t epoch, Progress& p);
  void run_epochs(Progress& p);
  void run_text(Progress& p);
  TrainSummary finish_summary();
  std::unique_ptr<State> s_;
};

}  // namespace cohort::train
