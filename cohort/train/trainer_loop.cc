// Trainer's epoch/step loop: one step, its timings and metrics, evaluation points.
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "cohort/core/clock.h"
#include "cohort/data/loader.h"
#include "cohort/data/text.h"
#include "cohort/nn/loss.h"
#include "cohort/ops/ops.h"
#include "cohort/train/batch_prefetch.h"
#include "cohort/train/elastic.h"
#include "cohort/train/elastic_join.h"
#include "cohort/train/fixed_batch.h"
#include "cohort/train/progress.h"
#include "cohort/train/run_trace.h"
#include "cohort/train/trainer_state.h"

namespace cohort::train {
namespace {

// The rank fault.slow_rank slows at `step`: that rank, or with fault.slow_rotate the next one
// each step (a transient straggler that moves around the job). -1: none.
int64_t slowed_rank(const Trainer::State& s, int64_t step) {
  const int64_t rank = s.cfg.get_int("fault.slow_rank");
  if (rank < 0 || !s.cfg.get_bool("fault.slow_rotate")) return rank;
  return (rank + step) % std::max(1, s.world->size);
}

// fault.slow_rank / fault.slow_factor: the straggler seam. After each step that rank sleeps
// (factor - 1) times the step's own time (batch, forward, backward, optimizer and the
// strategy's communication), so its steps take `factor` times as long; the sleep counts as
// backward time (the worker "computes" slower). A rotating straggler's sleep leaves out what
// the step waited for: that wait holds the previous step's straggler, and counting it would
// make each slow step slower than the last.
void maybe_slow_down(const Trainer::State& s, StepTimes& t) {
  if (s.world->rank != slowed_rank(s, s.step)) return;
  const double base =
      s.cfg.get_bool("fault.slow_rotate") ? std::max(0.0, t.total_s() - t.exposed_s) : t.total_s();
  const double extra = (s.cfg.get_float("fault.slow_factor") - 1) * base;
  if (extra <= 0) return;
  std::this_thread::sleep_for(std::chrono::duration<double>(extra));
  t.backward_s += extra;
}

// One optimizer step over `micro` (train.grad_accum_steps micro-batches, fewer at the end of
// an epoch), each weighted by its share of the step's samples (Strategy::forward_backward).
// Returns the step's loss.
double one_step(Trainer::State& s, const std::vector<data::Batch>& micro, StepTimes& t) {
  s.model->train();
  s.strategy->zero_grad();
  int64_t step_samples = 0;
  for (const data::Batch& b : micro) step_samples += b.y.size(0);
  std::vector<parallel::MicroBatch> parts;
  double weights = 0;
  for (const data::Batch& b : micro) {
    // Equal micro-batches: weight 1 / micro.size(), exactly (the division is correctly rounded).
    // Elastic's fixed global batch: each is one of its slots (train/fixed_batch.h).
    const double w =
        s.batch_slots > 0 ? slot_weight(s) : double(b.y.size(0)) / double(step_samples);
    parts.push_back({b.x.to(s.device), b.y.to(s.device), w});
    weights += w;
    t.samples += b.y.size(0);
  }
  // ZeRO-3's passes are collective: a worker with fewer slots runs empty ones (weight 0).
  for (int64_t k = int64_t(parts.size()); k < lockstep_passes(s); ++k)
    parts.push_back({parts.front().x, parts.front().y, 0.0});
  if (s.batch_slots > 0) {
    t.job_samples = micro.front().y.size(0) * s.batch_slots;
    t.samples = slot_samples_share(s, micro.front().y.size(0));
  }
  const bool exact = s.batch_slots > 0 && s.cfg.get_bool("elastic.exact");
  parallel::StrategyStats exact_comm;
  parallel::ForwardBackwardResult fb =
      exact ? exact_forward_backward(s, parts, exact_comm)
            : s.strategy->forward_backward(parts, [](const Tensor& out, const Tensor& y) {
                return nn::cross_entropy(out, y);
              });
  t.forward_s += fb.forward_s;
  t.backward_s += fb.backward_s;
  for (const parallel::StepPhase& ph : fb.phases) trace_span(s, ph.name, ph.from, ph.to);
  // This worker's mean loss (slot weights sum to W / K per micro-batch, not to 1).
  const double loss_sum = s.batch_slots > 0 && !exact ? fb.loss / weights : fb.loss;
  s.memory.after_backward();
  auto t2 = Clock::now();
  double clip = s.cfg.get_float("optim.clip_grad_norm");
  if (clip > 0) s.strategy->clip_grad_norm(clip);
  s.schedule->apply(*s.opt, s.step);
  s.strategy->step();
  t.optimizer_s = seconds_since(t2);
  if (s.tracer) trace_span(s, "optimizer", t2, Clock::now());
  parallel::StrategyStats c = exact ? exact_comm : strategy_stats(*s.strategy);
  t.exposed_s = c.exposed_s;
  t.comm_s = c.comm_s;
  t.bytes_sent = c.bytes_sent;
  t.bytes_received = c.bytes_received;
  maybe_slow_down(s, t);
  return loss_sum;
}

void log_eval(Trainer::State& s, Progress& p, const EvalResult& r, int64_t epoch) {
  double energy_j = energy_at_eval(s, r);  // collective: every rank
  if (!s.world->is_chief()) return;
  std::string acc = r.accuracy >= 0 ? detail::str(", accuracy ", r.accuracy * 100, "%") : "";
  p.line(detail::str("eval (", s.data.eval_name, ") after step ", s.step, ": loss ", r.loss, acc));
  nlohmann::json j{{"event", "eval"},
                   {"split", s.data.eval_name},
                   {"step", s.step},
                   {"epoch", epoch},
                   {"loss", r.loss},
                   {"samples", r.samples},
                   {"time_s", seconds_since(s.start)},
                   {"train_s", s.train_seconds}};  // time_s less evaluations and start-up
  if (r.accuracy >= 0) j["accuracy"] = r.accuracy;
  if (energy_j >= 0) j["energy_j"] = energy_j;  // the job's, cumulative
  s.log.write(j);
}

void log_step(Trainer::State& s, double loss, int64_t epoch, double sps) {
  nlohmann::json j{
      {"event", "step"},       {"step", s.step},       {"epoch", epoch},
      {"rank", s.world->rank}, {"loss", loss},         {"lr", s.opt->lr()},
      {"samples_per_s", sps},  {"samples", s.samples}, {"time_s", seconds_since(s.start)}};
  j.update(s.metrics.take_interval());
  j.update(s.energy.take_interval());
  if (parallel::StrategyMetrics* m = s.strategy->metrics()) j.update(m->take_interval_metrics());
  if (nlohmann::json f = s.stragglers.take_record(); !f.is_null()) j["straggler"] = f;
  s.log.write(j);
}

// fault.kill_rank / kill_at_step: the test seam for "a worker dies mid-epoch"; fault.stop_rank
// / stop_at_step: for "a worker hangs" (SIGSTOP: alive, silent, holding its connections).
void maybe_kill_self(const Trainer::State& s) {
  if (s.world->restart_count > 0 || s.world->worker_restarts > 0) return;  // first start only
  for (auto [who, when, sig, what] :
       {std::tuple{"fault.kill_rank", "fault.kill_at_step", SIGKILL, "kills itself"},
        std::tuple{"fault.stop_rank", "fault.stop_at_step", SIGSTOP, "stops itself (SIGSTOP)"}}) {
    if (s.world->rank != s.cfg.get_int(who) || s.step != s.cfg.get_int(when)) continue;
    std::fprintf(stderr, "fault injection: rank %d %s after step %ld\n", s.world->rank, what,
                 long(s.step));
    std::fflush(nullptr);
    std::raise(sig);
  }
}

}  // namespace

bool Trainer::State::out_of_time() {
  double limit = cfg.get_float("train.time_limit_s");
  if (limit <= 0) return false;
  int64_t stop = std::chrono::duration<double>(Clock::now() - start).count() >= limit;
  if (world->distributed())  // rank 0's clock decides, so every rank stops after the same step
    world->group->broadcast({.buffer = &stop, .count = 1, .dtype = comm::DType::i64});
  return stop != 0;
}

// One training step plus its bookkeeping; returns false when training must stop.
bool Trainer::train_step(const std::vector<data::Batch>& micro, int64_t epoch, int64_t batch_index,
                         double data_s, Progress& p) {
  State& s = *s_;
  StepTimes t;
  t.data_s = data_s;
  double loss = one_step(s, micro, t);
  s.memory.end_step();
  s.energy.end_step(t);
  s.metrics.add(t);
  s.train_seconds += t.total_s();
  ++s.step;
  s.pos = {epoch, batch_index + 1, s.pos.epoch == epoch ? s.pos.skip : 0};
  // Collective every metrics.straggler_every steps; rank 0 prints who is named.
  auto named = s.stragglers.after_step(s.step, t.total_s() - t.exposed_s);
  if (named && s.world->is_chief()) p.line(*named);
  s.samples += s.batch_slots > 0 ? t.job_samples : t.samples;
  double sps = double(s.samples) / std::max(s.train_seconds, 1e-9);
  s.loss_ema = s.step == 1 ? loss : 0.95 * s.loss_ema + 0.05 * loss;
  p.step(s.step, epoch, s.loss_ema, sps * samples_scale(s));
  if (s.step % s.cfg.get_int("run.log_every") == 0) log_step(s, loss, epoch, sps);
  int64_t every = s.cfg.get_int("ckpt.every_steps");
  if (every > 0 && s.step % every == 0) save_checkpoint();
  maybe_kill_self(s);
  int64_t eval_every = s.cfg.get_int("train.eval_every");
  if (eval_every > 0 && s.step % eval_every == 0 && s.step < s.total_steps) {
    s.last_eval = evaluate();
    log_eval(s, p, s.last_eval, epoch);
  }
  const bool more = s.step < s.total_steps && !s.out_of_time();
  if (more) admit_pending_joiners(s);  // throws MembershipChanged when workers joined
  return more;
}

namespace {

// On a device, step s+1's batches are copied there while step s computes (batch_prefetch.h);
// data.prefetch = 0 prepares nothing ahead, there either.
BatchPrefetch make_feed(const Trainer::State& s) {
  return BatchPrefetch(s.device, s.cfg.get_int("data.prefetch") > 0);
}

// train.eval_at_start: one evaluation before the first step of a fresh run.
bool evaluates_at_start(const Trainer::State& s) {
  return s.cfg.get_bool("train.eval_at_start") && s.step == 0;
}

}  // namespace

// The loaders of one epoch: this worker's share of it (a shard directory: its own shards; after
// in-place recovery, of what the old world had not trained on: the position's skip), or with
// elastic's fixed global batch one per slot it computes (train/fixed_batch.h).
namespace {

std::vector<std::unique_ptr<data::Loader>> make_epoch_loaders(const Trainer::State& s,
                                                              int64_t skip) {
  data::LoaderOptions lo{.batch = s.batch,
                         .shuffle = s.cfg.get_bool("data.shuffle"),
                         .seed = uint64_t(s.cfg.get_int("run.seed")),
                         .drop_last = false,
                         .prefetch = int(s.cfg.get_int("data.prefetch"))};
  std::vector<std::unique_ptr<data::Loader>> out;
  if (s.batch_slots > 0) {
    for (int64_t slot : own_slots(s)) {
      lo.sampler = data::DistributedSampler(int(slot), int(s.batch_slots),
                                            {.shuffle = lo.shuffle, .seed = lo.seed});
      out.push_back(std::make_unique<data::Loader>(s.data.train, lo));
    }
    return out;
  }
  if (s.data.sharded) {  // this worker's own shards, in lockstep on the smallest share
    lo.sampler = data::DistributedSampler(
        0, 1, {.shuffle = lo.shuffle, .seed = lo.seed, .max_samples = s.data.samples_per_worker});
  } else if (s.world->data_size > 1 || skip > 0) {
    lo.sampler = data::DistributedSampler(s.world->data_rank, s.world->data_size,
                                          {.shuffle = lo.shuffle, .seed = lo.seed, .skip = skip});
  }
  out.push_back(std::make_unique<data::Loader>(s.data.train, lo));
  return out;
}

}  // namespace

// Runs `train`; true when it ended, false when the membership changed under it (workers joined
// at a step boundary, or a lost peer failed a collective and the survivors recovered in place:
// train/elastic.h), and the caller runs it again from where the new world goes on.
bool Trainer::ran_to_the_end(Progress& p, const std::function<void()>& train) {
  State& s = *s_;
  try {
    train();
    return true;
  } catch (const MembershipChanged&) {
  } catch (const Error& e) {
    // A lost peer fails a collective with IoError (or Timeout at its deadline).
    const bool lost_peer = dynamic_cast<const IoError*>(&e) || dynamic_cast<const Timeout*>(&e);
    if (!lost_peer || !can_recover_in_place(s)) throw;
    recover_in_place(s, e.what());
    // Rank 0's output is the progress (a member that took over as rank 0 prints it now).
    if (s.world->is_chief()) p.set_mode(progress_mode(s.cfg.get_string("run.progress")));
  }
  p.set_total(s.total_steps);
  return false;
}

void Trainer::run_epochs(Progress& p) {
  State& s = *s_;
  if (evaluates_at_start(s)) log_eval(s, p, evaluate(), 0);
  while (!ran_to_the_end(p, [&] { run_epochs_from_resume(p); })) {
  }
}

void Trainer::run_epochs_from_resume(Progress& p) {
  State& s = *s_;
  BatchPrefetch feed = make_feed(s);
  bool more = s.step < s.total_steps;
  for (int64_t epoch = s.resume_pos.epoch; more && epoch < s.cfg.get_int("train.epochs"); ++epoch) {
    const bool resumed = epoch == s.resume_pos.epoch;
    auto loaders = make_epoch_loaders(s, resumed ? s.resume_pos.skip : 0);
    for (auto& l : loaders) {
      l->set_epoch(epoch);
      if (resumed) l->resume_at(s.resume_pos.batch_in_epoch);
    }
    data::Loader& loader = *loaders.front();
    // The other slots' loaders (fixed global batch) give a batch each with every one of it.
    std::vector<data::Loader::Iterator> companions;
    for (size_t k = 1; k < loaders.size(); ++k) companions.push_back(loaders[k]->begin());
    const int64_t per_step = s.grad_accum * int64_t(loaders.size());
    // Batches of this epoch trained on (the feed may hold the next step's, not yet trained).
    int64_t next_batch = resumed ? s.resume_pos.batch_in_epoch : 0;
    auto train = [&](std::optional<StepInput> ready) {
      if (!ready) return;
      more = train_step(ready->micro, ready->epoch, ready->batch_index, ready->data_s, p);
      next_batch = ready->batch_index + 1;
    };
    StepInput step{.epoch = epoch};
    auto wait_from = Clock::now();
    for (auto it = loader.begin(); !(it == loader.end()); ++it) {
      step.data_s += seconds_since(wait_from);
      if (s.tracer) trace_span(s, "data", wait_from, Clock::now());
      step.micro.push_back(*it);
      for (data::Loader::Iterator& c : companions) step.micro.push_back(*c), ++c;
      step.batch_index = it.index();
      // A step takes grad_accum micro-batches; the last step of an epoch may take fewer.
      if (int64_t(step.micro.size()) == per_step || it.index() + 1 == loader.len()) {
        train(feed.push(std::exchange(step, StepInput{.epoch = epoch})));
        if (!more) break;
      }
      wait_from = Clock::now();
    }
    if (more) train(feed.flush());  // the epoch's last step, copied while the one before ran
    if (!more) finish_strategy_training(*s.strategy);
    s.last_eval = evaluate();
    log_eval(s, p, s.last_eval, epoch);
    if (next_batch == loader.len()) {  // a whole epoch: the next run starts the next one
      s.pos = {epoch + 1, 0};
      save_checkpoint();
    }
  }
  // The epochs ran out before the step count did (a resume that converted the position).
  if (more) finish_strategy_training(*s.strategy);
}

namespace {

// Step `step`'s micro-batches of the text data. The step's global batch is rows 0 .. batch *
// workers * grad_accum - 1 of the step's draw (row g a function of run.seed, step and g):
// micro-batch m of rank r takes its rows (m * workers + r) * batch onwards, so the step sees the
// same rows for any split of the same global batch over workers and micro-batches.
StepInput draw_text_step(Trainer::State& s, const data::TextDataset& text, int64_t step) {
  auto t0 = Clock::now();
  StepInput in{.epoch = step / s.steps_per_epoch, .batch_index = step % s.steps_per_epoch};
  const uint64_t seed = uint64_t(s.cfg.get_int("run.seed"));
  if (s.batch_slots > 0) {  // elastic's fixed global batch: slot k is rows k * batch onwards
    for (int64_t slot : own_slots(s))
      in.micro.push_back(text.random_batch(s.batch, seed, step, slot * s.batch));
  }
  const int64_t micro_rows = s.batch * s.world->data_size;
  for (int64_t m = 0; s.batch_slots == 0 && m < s.grad_accum; ++m) {
    const int64_t first_row = m * micro_rows + s.world->data_rank * s.batch;
    in.micro.push_back(text.random_batch(s.batch, seed, step, first_row));
  }
  if (s.tracer) trace_span(s, "data", t0, Clock::now());
  in.data_s = seconds_since(t0);
  return in;
}

}  // namespace

void Trainer::run_text(Progress& p) {
  State& s = *s_;
  if (evaluates_at_start(s)) log_eval(s, p, evaluate(), 0);
  // A step's rows depend on the step alone: after a membership change the loop starts again
  // at the step the new world goes on from, drawing the new world's share of it.
  while (!ran_to_the_end(p, [&] { run_text_steps(p); })) {
  }
  finish_strategy_training(*s.strategy);
  s.last_eval = evaluate();
  log_eval(s, p, s.last_eval, s.step / s.steps_per_epoch);
}

void Trainer::run_text_steps(Progress& p) {
  State& s = *s_;
  auto& text = static_cast<const data::TextDataset&>(*s.data.train);
  BatchPrefetch feed = make_feed(s);
  int64_t drawn = s.step;  // the step whose batches are drawn next (one ahead on a device)
  bool more = s.step < s.total_steps;
  while (more) {
    std::optional<StepInput> ready =
        drawn < s.total_steps ? feed.push(draw_text_step(s, text, drawn++)) : feed.flush();
    if (ready)
      more = train_step(ready->micro, ready->epoch, ready->batch_index, ready->data_s, p);
    else if (drawn >= s.total_steps)
      break;  // nothing held, nothing left to draw (then every step drawn was trained)
  }
}

}  // namespace cohort::train
