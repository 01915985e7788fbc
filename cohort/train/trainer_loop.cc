// Trainer::run: the epoch/step loop, evaluation points, metrics and the summary.
#include <chrono>
#include <cstdio>

#include "cohort/autograd/node.h"
#include "cohort/core/thread_pool.h"
#include "cohort/data/loader.h"
#include "cohort/data/text.h"
#include "cohort/nn/loss.h"
#include "cohort/nn/models/gpt.h"
#include "cohort/optim/clip.h"
#include "cohort/train/progress.h"
#include "cohort/train/trainer_state.h"

namespace cohort::train {
namespace {

double one_step(Trainer::State& s, const data::Batch& b) {
  s.model->train();
  Tensor logits = (*s.model)(b.x);
  Tensor loss = nn::cross_entropy(logits, b.y);
  s.opt->zero_grad();
  loss.backward();
  double clip = s.cfg.get_float("optim.clip_grad_norm");
  if (clip > 0) optim::clip_grad_norm(s.opt->params(), clip);
  s.schedule->apply(*s.opt, s.step);
  s.opt->step();
  return double(loss.item<float>());
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void log_eval(Trainer::State& s, Progress& p, const EvalResult& r, int64_t epoch) {
  std::string acc = r.accuracy >= 0 ? detail::str(", accuracy ", r.accuracy * 100, "%") : "";
  p.line(detail::str("eval (", s.data.eval_name, ") after step ", s.step, ": loss ", r.loss, acc));
  nlohmann::json j{{"event", "eval"},
                   {"split", s.data.eval_name},
                   {"step", s.step},
                   {"epoch", epoch},
                   {"loss", r.loss},
                   {"samples", r.samples},
                   {"time_s", seconds_since(s.start)}};
  if (r.accuracy >= 0) j["accuracy"] = r.accuracy;
  s.log->write(j);
}

void log_step(Trainer::State& s, double loss, int64_t epoch, double sps) {
  s.log->write(nlohmann::json{{"event", "step"},
                              {"step", s.step},
                              {"epoch", epoch},
                              {"loss", loss},
                              {"lr", s.opt->lr()},
                              {"samples_per_s", sps},
                              {"time_s", seconds_since(s.start)}});
}

}  // namespace

// One training step plus its bookkeeping; returns false when training must stop.
bool Trainer::train_step(const data::Batch& b, int64_t epoch, Progress& p) {
  State& s = *s_;
  auto t0 = Clock::now();
  double loss = one_step(s, b);
  s.train_seconds += seconds_since(t0);
  ++s.step;
  s.samples += b.y.size(0);
  double sps = double(s.samples) / std::max(s.train_seconds, 1e-9);
  s.loss_ema = s.step == 1 ? loss : 0.95 * s.loss_ema + 0.05 * loss;
  p.step(s.step, epoch, s.loss_ema, sps);
  if (s.step % s.cfg.get_int("run.log_every") == 0) log_step(s, loss, epoch, sps);
  int64_t every = s.cfg.get_int("train.eval_every");
  if (every > 0 && s.step % every == 0 && s.step < s.total_steps) {
    s.last_eval = evaluate();
    log_eval(s, p, s.last_eval, epoch);
  }
  return s.step < s.total_steps && !s.out_of_time();
}

TrainSummary Trainer::run() {
  State& s = *s_;
  s.run_dir = make_run_dir(s.cfg);
  s.log = std::make_unique<MetricsLog>(s.run_dir + "/metrics.jsonl");
  s.start = Clock::now();
  s.log->write(nlohmann::json{{"event", "start"},
                              {"model", s.cfg.get_string("model.type")},
                              {"parameters", s.model->num_parameters()},
                              {"total_steps", s.total_steps},
                              {"threads", num_threads()}});
  std::printf("cohort train: %s, %ld parameters, %ld steps, %d thread(s), run dir %s\n",
              s.cfg.get_string("model.type").c_str(), long(s.model->num_parameters()),
              long(s.total_steps), num_threads(), s.run_dir.c_str());
  Progress p(progress_mode(s.cfg.get_string("run.progress")), s.total_steps,
             s.cfg.get_int("run.log_every"));
  p.set_time_limit(s.cfg.get_float("train.time_limit_s"));
  if (s.data.is_text) {
    run_text(p);
  } else {
    run_epochs(p);
  }
  p.finish();
  return finish_summary();
}

void Trainer::run_epochs(Progress& p) {
  State& s = *s_;
  data::Loader loader(s.data.train, {.batch = s.batch,
                                     .shuffle = s.cfg.get_bool("data.shuffle"),
                                     .seed = uint64_t(s.cfg.get_int("run.seed")),
                                     .drop_last = false,
                                     .prefetch = int(s.cfg.get_int("data.prefetch"))});
  bool more = s.total_steps > 0;
  for (int64_t epoch = 0; more && epoch < s.cfg.get_int("train.epochs"); ++epoch) {
    loader.set_epoch(epoch);
    for (auto& b : loader)
      if (!(more = train_step(b, epoch, p))) break;
    s.last_eval = evaluate();
    log_eval(s, p, s.last_eval, epoch);
  }
}

void Trainer::run_text(Progress& p) {
  State& s = *s_;
  auto& text = static_cast<const data::TextDataset&>(*s.data.train);
  uint64_t seed = uint64_t(s.cfg.get_int("run.seed"));
  bool more = s.total_steps > 0;
  while (more) {
    data::Batch b = text.random_batch(s.batch, seed, s.step);
    more = train_step(b, s.step / s.steps_per_epoch, p);
  }
  s.last_eval = evaluate();
  log_eval(s, p, s.last_eval, s.step / s.steps_per_epoch);
}

TrainSummary Trainer::finish_summary() {
  State& s = *s_;
  TrainSummary sum;
  sum.steps = s.step;
  sum.train_seconds = s.train_seconds;
  sum.samples_per_s = double(s.samples) / std::max(s.train_seconds, 1e-9);
  sum.eval = s.last_eval;
  sum.run_dir = s.run_dir;
  int64_t n = s.cfg.get_int("train.sample_bytes");
  if (auto* gpt = dynamic_cast<nn::GPT*>(s.model.get()); gpt && n > 0) {
    autograd::NoGradGuard ng;
    gpt->eval();
    nn::GenerateOptions g;
    g.max_new_tokens = n;
    g.temperature = s.cfg.get_float("train.sample_temperature");
    g.seed = uint64_t(s.cfg.get_int("run.seed"));
    sum.sample = gpt->generate(s.cfg.get_string("train.sample_prompt"), g);
    std::printf("--- sample ---\n%s\n--------------\n", sum.sample.c_str());
  }
  nlohmann::json j{{"event", "summary"},
                   {"steps", sum.steps},
                   {"train_seconds", sum.train_seconds},
                   {"samples_per_s", sum.samples_per_s},
                   {"eval_loss", sum.eval.loss},
                   {"wall_seconds", seconds_since(s.start)}};
  if (sum.eval.accuracy >= 0) j["eval_accuracy"] = sum.eval.accuracy;
  s.log->write(j);
  std::string acc = sum.eval.accuracy >= 0 ? detail::str(", ", s.data.eval_name, " accuracy ",
                                                         sum.eval.accuracy * 100, "%")
                                           : "";
  std::printf("done: %ld steps in %.1fs (%.0f samples/s), %s loss %.4f%s\nmetrics: %s\n",
              long(sum.steps), sum.train_seconds, sum.samples_per_s, s.data.eval_name.c_str(),
              sum.eval.loss, acc.c_str(), s.log->path().c_str());
  return sum;
}

}  // namespace cohort::train
