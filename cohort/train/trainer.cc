#include "cohort/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cohort/autograd/node.h"
#include "cohort/core/logging.h"
#include "cohort/core/thread_pool.h"
#include "cohort/data/loader.h"
#include "cohort/data/text.h"
#include "cohort/metrics/sink.h"
#include "cohort/metrics/stream_sink.h"
#include "cohort/nn/loss.h"
#include "cohort/nn/models/gpt.h"
#include "cohort/ops/ops.h"
#include "cohort/optim/clip.h"
#include "cohort/parallel/strategy_registry.h"
#include "cohort/train/components.h"
#include "cohort/train/device_select.h"
#include "cohort/train/elastic.h"
#include "cohort/train/elastic_join.h"
#include "cohort/train/elastic_strategy.h"
#include "cohort/train/evaluate.h"
#include "cohort/train/fixed_batch.h"
#include "cohort/train/init_weights.h"
#include "cohort/train/progress.h"
#include "cohort/train/run_dir.h"
#include "cohort/train/shard_data.h"
#include "cohort/train/trainer_state.h"

namespace cohort::train {

std::string make_run_dir(const Config& cfg, bool write_config) {
  std::filesystem::path dir =
      std::filesystem::path(cfg.get_string("run.dir")) / cfg.get_string("run.name");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  COHORT_CHECK_IO(!ec, "cannot create run directory '", dir.string(), "': ", ec.message());
  if (write_config) std::ofstream(dir / "config.toml") << cfg.to_toml();
  return dir.string();
}

namespace {

// Loader batches in one pass over this worker's share of the training data (the distributed
// sampler pads every shard to ceil(size / workers)): ceil(size / (batch * workers)), the same
// for every split of one global batch. Text: steps whose global batches (batch * workers *
// grad_accum windows of block bytes) hold as many bytes as the training split, at least one.
int64_t batches_per_epoch(const DataSplits& d, int64_t batch, int workers) {
  int64_t shard = d.sharded ? d.samples_per_worker : (d.train->size() + workers - 1) / workers;
  return (shard + batch - 1) / batch;  // the last batch may be short
}
int64_t text_steps_per_epoch(const DataSplits& d, int64_t global_batch, int64_t block) {
  auto& text = static_cast<const data::TextDataset&>(*d.train);
  return std::max<int64_t>(1, text.num_bytes() / (global_batch * block));
}

// Where this run writes (run_dir.h): the directory `cohort train --workers` chose for every
// worker and restart, else rank 0's choice on every rank. Only rank 0 looks at the disk, so
// ranks never disagree over a directory one of them just made. Settled right after joining,
// before the strategy starts: parameter servers started by another launcher wait for rank 0's
// choice in the store before they write anything, and a PS worker waits for the servers.
void settle_run_dir(Trainer::State& s, const rendezvous::EnvMap& env) {
  if (auto it = env.find(kRunDirVariable); it != env.end() && !it->second.empty()) {
    set_run_dir(s.cfg, it->second);
    return;
  }
  const TrainWorld& w = *s.world;
  std::string dir;
  if (w.is_chief()) {
    const int restarts = std::max(w.restart_count, w.worker_restarts);
    const RunDir d = choose_run_dir(s.cfg.get_string("run.dir"), s.cfg.get_string("run.name"),
                                    run_start(s.cfg, restarts));
    if (d.avoided_earlier()) std::printf("%s\n", numbered_run_notice(d).c_str());
    dir = d.path;
  }
  set_run_dir(s.cfg, agree_on_run_dir(w, dir, s.cfg.get_float("comm.timeout_s")));
}

}  // namespace

Trainer::Trainer(const Config& cfg, const rendezvous::EnvMap& env)
    : s_(std::make_unique<State>(cfg)) {
  s_->env = env;
  check_combination(cfg);
  check_elastic_config(cfg);
  s_->world = join_world(cfg, env);
  settle_run_dir(*s_, env);
  if (s_->world->size > 1) log::set_rank(s_->world->rank);
  // Under `--dashboard` every record also goes to the launcher (metrics/stream_sink.h), after
  // the JSONL file (start_run), so that a stalled launcher never delays the file.
  s_->stream = metrics::stream_sink_from_env(env, s_->world->rank);
  set_num_threads(int(cfg.get_int("run.threads")));
  s_->energy = make_energy_account(cfg, *s_->world);  // the model counts the threads
  s_->batch = cfg.get_int("data.batch_size");
  s_->data = make_data(cfg, {s_->world->rank, s_->world->size});
  agree_on_shards(s_->data, *s_->world);  // collective when the data is a shard directory
  COHORT_CHECK_ARG(s_->data.is_text || s_->data.train->size() >= s_->batch,
                   "config: data.batch_size ", s_->batch, " is larger than the training set (",
                   s_->data.train->size(), " samples)");
  s_->mesh = make_mesh(cfg, *s_->world);  // collective when the model is split
  s_->model = s_->mesh ? make_model(cfg, *s_->mesh) : make_model(cfg, s_->data.inputs);
  COHORT_CHECK_ARG(!s_->mesh || cfg.get_string("model.init_from").empty(),
                   "config: model.init_from with a model split over ranks (parallel.pp or "
                   "parallel.tp > 1) is not supported: load the weights into the whole model "
                   "(pp = tp = 1)");
  s_->init_weights = load_initial_weights(cfg, *s_->model);  // before it moves to its device
  s_->device = select_device(cfg, s_->world->size);
  if (cfg.get_string("train.precision") == "bf16")
    s_->precision = std::make_unique<ops::MatmulPrecisionScope>(ops::MatmulPrecision::kBF16);
  s_->model->to(s_->device);  // before the optimizer: its state is made where the parameters are
  s_->memory.tag_parameters(*s_->model);
  s_->opt = make_optimizer(cfg, *s_->model);
  s_->grad_accum = cfg.get_int("train.grad_accum_steps");
  s_->batch_slots = fixed_batch_slots(*s_);  // 0 unless elastic (train/fixed_batch.h)
  if (s_->batch_slots > 0 && cfg.get_bool("elastic.exact")) check_exact_model(*s_);
  if (s_->data.is_text) {
    const int64_t workers = s_->batch_slots > 0 ? s_->batch_slots : s_->world->data_size;
    s_->steps_per_epoch = text_steps_per_epoch(s_->data, s_->batch * workers * s_->grad_accum,
                                               cfg.get_int("model.block_size"));
    s_->batches_per_epoch = s_->steps_per_epoch * s_->grad_accum;
  } else {
    s_->batches_per_epoch = batches_per_epoch(
        s_->data, s_->batch, s_->batch_slots > 0 ? int(s_->batch_slots) : s_->world->data_size);
    s_->steps_per_epoch = (s_->batches_per_epoch + s_->grad_accum - 1) / s_->grad_accum;
  }
  int64_t max_steps = cfg.get_int("train.max_steps");
  s_->total_steps = cfg.get_int("train.epochs") * s_->steps_per_epoch;
  if (max_steps > 0) s_->total_steps = std::min(s_->total_steps, max_steps);
  if (s_->data.is_text && max_steps > 0) s_->total_steps = max_steps;
  s_->schedule = make_schedule(cfg, s_->total_steps);  // the whole run's, as the others have
  if (s_->world->joiner) join_running_job(*s_);        // the world and state of the running job
  // Collective for distributed strategies (DDP broadcasts rank 0's parameters).
  std::shared_ptr<rendezvous::Store> store =
      s_->world->joined ? s_->world->joined->store.store : nullptr;
  s_->strategy = parallel::make_strategy(
      strategy_name(cfg, s_->mesh.get()),
      {*s_->model, *s_->opt, s_->world->group, cfg, store, &env, s_->total_steps, s_->world->rank,
       s_->world->size, s_->world->worker_restarts, s_->mesh});
  if (s_->joined_running_job) after_new_strategy(*s_);  // what the workers' new ones carry
  check_strategy_on_device(cfg, s_->device, s_->strategy->name());
  // Parameter-server workers have no group (they must not wait for each other): no watch.
  s_->stragglers = StragglerWatch(straggler_options(cfg), s_->world->group);
}

Trainer::~Trainer() {
  if (s_->strategy) s_->strategy->shutdown();
}
nn::Module& Trainer::model() {
  return *s_->model;
}

EvalResult Trainer::evaluate() {
  metrics::Span span(s_->tracer.get(), "evaluate", "eval");
  s_->model->eval();
  EvalOptions o;
  o.max_batches = s_->cfg.get_int("train.eval_batches");
  o.batch = s_->data.is_text ? s_->batch : std::max<int64_t>(s_->batch, 500);
  o.is_text = s_->data.is_text;
  return evaluate_split(
      [&](const Tensor& x) { return s_->strategy->eval_forward(x.to(s_->device)); }, s_->data.eval,
      o);
}
}  // namespace cohort::train
