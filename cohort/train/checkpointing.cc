#include "cohort/train/checkpointing.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

#include "cohort/core/logging.h"
#include "cohort/nn/layers.h"
#include "cohort/train/checkpoint_shards.h"
#include "cohort/train/fixed_batch.h"

namespace cohort::train {
namespace {

// Strategy tensors ride in optimizer.safetensors under kStrategyPrefix (the training state
// beyond the model), its values in state.json under "strategy".

std::string per_rank_file(int rank) {
  return detail::str("strategy.rank", rank);
}

void capture_strategy(const std::string& name, const StrategySnapshot& snap,
                      ckpt::CheckpointData& d) {
  const parallel::StrategyState& st = snap.state;
  if (st.per_rank) {
    for (size_t r = 0; r < snap.per_rank.size(); ++r)
      d.extra[per_rank_file(int(r))] = snap.per_rank[r];
  } else {
    for (auto& [tensor, t] : st.tensors) d.optimizer.emplace_back(kStrategyPrefix + tensor, t);
  }
  d.state["strategy"] = {{"name", name},
                         {"values", st.values},
                         {"per_rank", st.per_rank},
                         {"ranks", snap.per_rank.size()}};
}

// The strategy's state: its tensors (found under kStrategyPrefix in the optimizer section,
// or, per-rank, in this rank's file) with its values: what load_state gets once the model and
// optimizer are restored (a strategy may overwrite them with its own rank's). Nothing for a
// checkpoint of another strategy.
std::optional<parallel::StrategyState> take_strategy_state(const parallel::Strategy& strategy,
                                                           const ckpt::CheckpointData& d,
                                                           const NamedTensors& tensors, int rank,
                                                           int world) {
  const nlohmann::json& state = d.state;
  parallel::StrategyState st;
  const std::string prefix = kStrategyPrefix;
  for (const auto& [name, t] : tensors) st.tensors.emplace_back(name.substr(prefix.size()), t);
  // A checkpoint from another strategy (or from before strategies) restores nothing.
  if (!state.contains("strategy") || state["strategy"].value("name", "") != strategy.name())
    return std::nullopt;
  const nlohmann::json& saved = state["strategy"];
  if (saved.value("per_rank", false)) {
    const int ranks = saved.value("ranks", 0);
    COHORT_CHECK_ARG(ranks == world, "the checkpoint holds per-rank state of strategy '",
                     strategy.name(), "' for ", ranks, " rank(s), this run has ", world,
                     "; resume with ", ranks, " worker(s)");
    auto it = d.extra.find(per_rank_file(rank));
    COHORT_CHECK_IO(it != d.extra.end(), "the checkpoint lists no ", per_rank_file(rank),
                    ".safetensors for rank ", rank);
    st.tensors = it->second;
    st.per_rank = true;
  }
  st.values = saved.at("values");
  return st;
}

// Every rank's per-rank tensors to rank 0, in the checkpoint's own encoding: a size, then the
// bytes, per rank (the deadline is the group's).
std::vector<NamedTensors> gather_to_chief(Trainer::State& s, const NamedTensors& mine) {
  if (!s.world->distributed()) return {mine};
  comm::ProcessGroup& g = *s.world->group;
  constexpr uint32_t kTag = 0xc4e0;
  if (g.rank() != 0) {
    const std::vector<uint8_t> bytes = ckpt::encode_safetensors(mine, per_rank_file(g.rank()));
    int64_t size = int64_t(bytes.size());
    g.send({.buffer = &size, .count = 1, .dtype = comm::DType::i64, .peer = 0, .tag = kTag});
    g.send({.buffer = bytes.data(),
            .count = bytes.size(),
            .dtype = comm::DType::u8,
            .peer = 0,
            .tag = kTag});
    return {};
  }
  std::vector<NamedTensors> all{mine};
  for (int r = 1; r < g.size(); ++r) {
    int64_t size = 0;
    g.recv({.buffer = &size, .count = 1, .dtype = comm::DType::i64, .peer = r, .tag = kTag});
    COHORT_CHECK_IO(size >= 0 && size < (int64_t{1} << 40), "checkpoint: rank ", r, " announced ",
                    size, " bytes of per-rank strategy state");
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    g.recv({.buffer = bytes.data(),
            .count = bytes.size(),
            .dtype = comm::DType::u8,
            .peer = r,
            .tag = kTag});
    all.push_back(
        ckpt::parse_safetensors(bytes, per_rank_file(r) + " from rank " + std::to_string(r)));
  }
  return all;
}

}  // namespace

// One path for every strategy (its checkpoint facet): whole tensors stay on rank 0, the other
// pieces travel to it (an empty set from a strategy whose tensors are all whole).
StrategySnapshot snapshot_strategy(Trainer::State& s) {
  parallel::StrategyCheckpoint& facet = s.strategy->checkpoint();
  StrategySnapshot snap;
  snap.state = facet.state();
  if (snap.state.per_rank) snap.per_rank = gather_to_chief(s, snap.state.tensors);
  parallel::CheckpointPieces mine = facet.pieces();
  std::vector<ckpt::TensorPiece> cut;
  for (ckpt::TensorPiece& p : mine.pieces) (p.shard < 0 ? snap.whole : cut).push_back(std::move(p));
  std::vector<NamedTensors> all = gather_to_chief(s, encode_pieces(cut));
  for (size_t r = 0; r < all.size(); ++r) snap.pieces.push_back(decode_pieces(all[r], int(r)));
  if (!s.world->is_chief()) snap.whole.clear();  // alike on every rank: rank 0's are written
  snap.optimizer_scalars = std::move(mine.optimizer_scalars);
  return snap;
}

namespace {

std::string step_dir(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%010lld", static_cast<long long>(step));
  return (std::filesystem::path(dir) / name).string();
}

// The step directory rank 0 chose, told to every rank (-1: none). Non-chief ranks pass -1.
int64_t agree_on_step(Trainer::State& s, int64_t chosen) {
  if (!s.world->distributed()) return chosen;
  s.world->group->broadcast({.buffer = &chosen, .count = 1, .dtype = comm::DType::i64});
  return chosen;
}

// Keys that decide which samples a step sees: resuming with any of them changed would not
// continue the same run, so it is an error naming the key (change them in a fresh run).
// data.batch_size and train.grad_accum_steps are recorded too, but with the world size
// (state.json "world_size") they make the global batch, and that is what must match, or
// convert (batch_split, check_same_run).
const char* const kResumeKeys[] = {
    "data.dataset", "data.batch_size", "data.shuffle",          "run.seed",
    "model.type",   "optim.name",      "train.grad_accum_steps"};
constexpr char kBatchKey[] = "data.batch_size";
constexpr char kAccumKey[] = "train.grad_accum_steps";

nlohmann::json resume_keys(const Config& cfg) {
  nlohmann::json j = nlohmann::json::object();
  for (const char* k : kResumeKeys) j[k] = cfg.value_str(k);
  return j;
}

// How a run splits its global batch: a step is `accum` micro-batches of `batch` samples on
// each of `workers` ranks; one micro-batch of every rank is the loader's global micro-batch.
struct BatchSplit {
  int64_t batch = 0;
  int64_t workers = 1;
  int64_t accum = 1;
  int64_t micro() const { return batch * workers; }
  int64_t global() const { return batch * workers * accum; }
  std::string describe() const {
    return detail::str(global(), " (data.batch_size ", batch, " x ", workers,
                       " worker(s) x train.grad_accum_steps ", accum, ")");
  }
};

BatchSplit batch_split(const Trainer::State& s) {
  return {s.batch, data_split_workers(s), s.grad_accum};
}

// The split the checkpoint's run used; nullopt for a checkpoint that does not record both
// data.batch_size and train.grad_accum_steps (its per-worker batch must match, as before).
std::optional<BatchSplit> recorded_split(const nlohmann::json& state) {
  if (!state.contains("resume_keys")) return std::nullopt;
  const nlohmann::json& keys = state.at("resume_keys");
  if (!keys.contains(kBatchKey) || !keys.contains(kAccumKey)) return std::nullopt;
  try {
    return BatchSplit{std::stoll(keys.at(kBatchKey).get<std::string>()),
                      state.value("data_workers", state.at("world_size").get<int64_t>()),
                      std::stoll(keys.at(kAccumKey).get<std::string>())};
  } catch (const std::logic_error&) {  // not a number: compare the strings, as before
    return std::nullopt;
  }
}

// Loader batches in an epoch for split b (the sampler pads each shard to ceil(n / workers)).
int64_t epoch_batches(int64_t n, const BatchSplit& b) {
  return ((n + b.workers - 1) / b.workers + b.batch - 1) / b.batch;
}

// The checkpoint's position (epoch, loader batches of it consumed per rank, in the recorded
// split) in this run's split: the samples consumed, batch_in_epoch x the old global
// micro-batch, in this run's global micro-batches. A finished epoch stays finished. The samples
// must be a whole number of this run's global batches, else the error says what to set. Text
// runs have no position (a step's rows are a function of the step): theirs is kept.
LoopPosition convert_position(const Trainer::State& s, const ckpt::CheckpointData& d,
                              const BatchSplit& then, LoopPosition saved) {
  const BatchSplit now = batch_split(s);
  if (s.data.is_text || (then.micro() == now.micro() && then.global() == now.global()))
    return saved;
  // After in-place recovery mid-epoch (train/elastic.h) the position is a skip plus batches of
  // that split: only the same split continues it exactly.
  COHORT_CHECK_ARG(saved.skip == 0, "cannot resume from the checkpoint of step ", d.step, " with ",
                   now.describe(), ": it was written mid-epoch after workers were lost, ", "by ",
                   then.describe(), "; resume with that split, or from a checkpoint taken ",
                   "at the end of an epoch");
  // Shards are dealt by worker: another count gives each worker other samples mid-epoch.
  COHORT_CHECK_ARG(!s.data.sharded || then.workers == now.workers, "cannot resume from the ",
                   "checkpoint of step ", d.step, " with ", now.workers, " workers: its data is a ",
                   "shard directory dealt to ", then.workers, " workers; resume with ",
                   then.workers);
  const int64_t n = s.data.sharded ? s.data.samples_per_worker * now.workers : s.data.train->size();
  if (saved.batch_in_epoch >= epoch_batches(n, then)) return {saved.epoch, epoch_batches(n, now)};
  const int64_t samples = saved.batch_in_epoch * then.micro();
  if (samples % now.global() != 0) {
    const int64_t per_worker = now.workers * now.accum;
    std::string hint =
        then.global() % per_worker == 0
            ? detail::str("set data.batch_size = ", then.global() / per_worker,
                          " to keep the global batch of ", then.global())
            : detail::str("choose data.batch_size x workers x train.grad_accum_steps = ",
                          then.global(), ", or a global batch that divides ", samples);
    COHORT_CHECK_ARG(false, "cannot resume from the checkpoint of step ", d.step,
                     ": it was written after ", samples, " samples of epoch ", saved.epoch,
                     " with a global batch of ", then.describe(), "; this run's global batch is ",
                     now.describe(), ", and ", samples,
                     " is not a whole number of its steps. To resume, ", hint,
                     " (or resume from a checkpoint taken at the end of an epoch)");
  }
  return {saved.epoch, samples / now.micro()};
}

void check_same_run(const Trainer::State& s, const ckpt::CheckpointData& d) {
  const nlohmann::json& j = d.state;
  const std::optional<BatchSplit> then = recorded_split(j);
  if (j.contains("resume_keys")) {
    for (auto& [k, v] : j.at("resume_keys").items()) {
      if (then && (k == kBatchKey || k == kAccumKey)) continue;  // the global batch, below
      std::string now = s.cfg.value_str(k);
      COHORT_CHECK_ARG(v.get<std::string>() == now, "cannot resume from the checkpoint of step ",
                       d.step, ": it was written with ", k, " = ", v.get<std::string>(),
                       ", this run has ", k, " = ", now,
                       " (start a fresh run, without --resume, to change it)");
    }
  }
  int written_by = j.at("world_size").get<int>();
  LoopPosition saved{j.at("epoch").get<int64_t>(), j.at("batch_in_epoch").get<int64_t>(),
                     j.value("epoch_skip", int64_t(0))};
  if (!then) {
    // A checkpoint without the split: mid-epoch its position counts batches per worker, which
    // means other samples with another number of workers. At an epoch boundary only the data
    // order differs.
    COHORT_CHECK_ARG(written_by == s.world->size || saved.batch_in_epoch == 0,
                     "cannot resume from the checkpoint of step ", d.step,
                     ": it was written mid-epoch by ", written_by, " worker(s) and this run has ",
                     s.world->size, "; resume with ", written_by,
                     " worker(s), or from a checkpoint taken at the end of an epoch");
    if (written_by != s.world->size && s.world->is_chief())
      log::warn("train", "resuming a checkpoint written by ", written_by, " worker(s) with ",
                s.world->size, ": the data order differs from an uninterrupted run");
    return;
  }
  const BatchSplit now = batch_split(s);
  const LoopPosition pos = convert_position(s, d, *then, saved);  // throws if it cannot
  if (!s.world->is_chief()) return;
  if (then->global() != now.global()) {
    log::warn(
        "train", "resuming a checkpoint written with a global batch of ", then->describe(),
        " with ", now.describe(), ": the steps from here differ from an uninterrupted run",
        s.data.is_text
            ? detail::str(" (step ", d.step, " continues with ", now.global(), " rows per step)")
            : detail::str(" (epoch ", saved.epoch, " resumes at batch ", pos.batch_in_epoch, " of ",
                          now.micro(), " samples, after ", saved.batch_in_epoch, " of ",
                          then->micro(), ")"));
    return;
  }
  if (then->workers == now.workers && then->micro() == now.micro()) return;
  // The same global batch split otherwise: the same samples per step, except where padding or
  // dropout depends on the split.
  if (!s.data.is_text) {
    const int64_t n = s.data.train->size();
    auto padded = [n](int64_t w) { return (n + w - 1) / w * w; };
    if (padded(then->workers) != padded(now.workers))
      log::warn("train", "resuming a checkpoint written by ", then->workers, " worker(s) with ",
                now.workers, ": the ", n, " training samples are padded to ", padded(then->workers),
                " and ", padded(now.workers),
                ", so the last step of each epoch differs from an uninterrupted run");
  }
  if (s.cfg.get_float("model.dropout") > 0)
    log::warn("train", "resuming a checkpoint written with ", then->describe(), " with ",
              now.describe(),
              ": dropout masks follow each worker's micro-batches, so they differ "
              "from an uninterrupted run");
}

}  // namespace

nn::StateDict checkpoint_model_state(const ckpt::CheckpointData& d, const ckpt::ShardedView& view) {
  nn::StateDict model = model_state_of(view);
  // Checkpoints written before the dropout counters became module state (the "rng_counter"
  // buffers) kept them in state.json as {"dropout_counters": {"<module>": n}}; the checkpoint
  // format (MANIFEST version 1) is the same, so such a checkpoint is known by that key. Its
  // counters go back under the buffers' names here; without them load_state_dict would refuse
  // the checkpoint, naming each missing "<module>.rng_counter". A counter the model file has
  // wins (no checkpoint has both).
  auto old = d.state.find("dropout_counters");
  if (old != d.state.end()) {
    for (auto& [module, n] : old->get<std::map<std::string, uint64_t>>()) {
      std::string key = module.empty() ? std::string(nn::kDropoutCounterBuffer)
                                       : module + "." + nn::kDropoutCounterBuffer;
      Tensor t = zeros({}, DType::i64);
      t.data<int64_t>()[0] = int64_t(n);
      model.emplace(key, t);
    }
  }
  return model;
}

ckpt::CheckpointData capture_checkpoint(const Trainer::State& s, const LoopPosition& pos,
                                        const StrategySnapshot& strategy) {
  ckpt::CheckpointData d;
  d.step = s.step;
  // Every tensor comes from the strategy's pieces (snapshot_strategy): whole ones here, the
  // others into shard files below.
  for (const ckpt::TensorPiece& p : strategy.whole) {
    COHORT_CHECK_ARG(p.section == "model" || p.section == "optimizer", "strategy '",
                     s.strategy->name(), "' gave tensor ", p.name, " in section '", p.section,
                     "'; checkpoints have model and optimizer");
    (p.section == "model" ? d.model : d.optimizer).emplace_back(p.name, p.data);
  }
  d.state = nlohmann::json{{"step", s.step},
                           {"epoch", pos.epoch},
                           {"batch_in_epoch", pos.batch_in_epoch},
                           {"samples", s.samples},
                           {"train_seconds", s.train_seconds},
                           {"loss_ema", s.loss_ema},
                           {"optimizer_scalars", strategy.optimizer_scalars},
                           {"world_size", s.world->size},
                           {"data_workers", data_split_workers(s)},
                           {"epoch_skip", pos.skip},
                           {"resume_keys", resume_keys(s.cfg)},
                           {"config", s.cfg.to_toml()}};
  capture_strategy(s.strategy->name(), strategy, d);
  const bool cut = std::any_of(strategy.pieces.begin(), strategy.pieces.end(),
                               [](const auto& rank_pieces) { return !rank_pieces.empty(); });
  if (cut) ckpt::add_shards(d, s.world->size, strategy.pieces);
  return d;
}

LoopPosition restore_checkpoint(Trainer::State& s, const ckpt::CheckpointData& d) {
  const nlohmann::json& j = d.state;
  try {
    check_same_run(s, d);
    // Whole tensors or pieces, from any world size (ckpt/sharded.h).
    const ckpt::ShardedView view(d);
    parallel::StrategyCheckpoint& facet = s.strategy->checkpoint();
    facet.load(
        {.view = view,
         .whole_model = [&] { return checkpoint_model_state(d, view); },
         .whole_optimizer =
             [&] {
               NamedTensors theirs;  // the strategy's, read below
               return optimizer_tensors_of(view, true, &theirs);
             },
         .optimizer_scalars = j.at("optimizer_scalars").get<std::map<std::string, double>>()});
    NamedTensors strategy_tensors;
    optimizer_tensors_of(view, false, &strategy_tensors);
    const std::optional<parallel::StrategyState> strategy =
        take_strategy_state(*s.strategy, d, strategy_tensors, s.world->rank, s.world->size);
    if (strategy) facet.load_state(*strategy);
    s.step = j.at("step").get<int64_t>();
    s.samples = j.at("samples").get<int64_t>();
    s.train_seconds = j.at("train_seconds").get<double>();
    s.loss_ema = j.at("loss_ema").get<double>();
    return {j.at("epoch").get<int64_t>(), j.at("batch_in_epoch").get<int64_t>(),
            j.value("epoch_skip", int64_t(0))};
  } catch (const nlohmann::json::exception& e) {
    COHORT_CHECK_IO(false, "checkpoint step ", d.step, ": state.json is missing or has a bad ",
                    "field: ", e.what());
  } catch (const InvalidArgument& e) {  // the model or optimizer does not fit the checkpoint
    throw InvalidArgument(detail::str("checkpoint step ", d.step, ": ", e.what()));
  }
  return {};
}

LoopPosition resume_position(const Trainer::State& s, const ckpt::CheckpointData& d,
                             const LoopPosition& restored) {
  const std::optional<BatchSplit> then = recorded_split(d.state);
  return then ? convert_position(s, d, *then, restored) : restored;
}

// Rank 0 could not load the checkpoint. Every rank logs why, then all meet before anyone
// exits: the launcher stops the job as soon as the first rank exits, and a rank still on its
// way to printing the reason would be stopped silently.
[[noreturn]] void fail_resume_together(Trainer::State& s, std::exception_ptr error,
                                       const std::string& resume) {
  std::string why = detail::str("rank 0 could not load the checkpoint to resume from (", resume,
                                "); see its error");
  // Both sides say it before the meeting: whichever exits first, the launcher stops the other.
  if (!error) log::error("ckpt", why);
  try {
    if (error) std::rethrow_exception(error);
  } catch (const std::exception& e) {
    log::error("ckpt", e.what());
  }
  try {  // a job of one has no group and no one to wait for
    if (s.world->distributed()) s.world->group->barrier(std::chrono::seconds(10));
  } catch (const std::exception&) {  // a peer already gone: nothing more to wait for
  }
  if (error) std::rethrow_exception(error);
  throw IoError(why);
}

std::optional<ckpt::CheckpointData> find_resume_checkpoint(Trainer::State& s) {
  std::string resume = s.cfg.get_string("run.resume");
  if (resume.empty() && s.world->restart_count > 0) resume = "auto";
  if (resume.empty()) return std::nullopt;
  bool auto_mode = resume == "auto";
  std::optional<ckpt::CheckpointData> d;
  constexpr int64_t kNone = -1, kFailed = -2;
  int64_t chosen = kNone;
  std::exception_ptr error;
  if (s.world->is_chief()) {
    try {
      // A restarted attempt continues from its own newest checkpoint, whatever it started from.
      if (auto_mode || s.world->restart_count > 0) d = s.ckpt->load_latest();
      if (!d && !auto_mode) d = ckpt::CheckpointManager::load(resume);
      if (d) chosen = d->step;
    } catch (...) {  // tell the others before failing, so they do not wait for the deadline
      error = std::current_exception();
      chosen = kFailed;
    }
  }
  chosen = agree_on_step(s, chosen);
  if (chosen == kFailed) fail_resume_together(s, error, resume);
  if (chosen == kNone) return std::nullopt;
  if (!s.world->is_chief()) {  // rank 0's choice: its newest, or the explicit path
    std::string newest = step_dir(s.ckpt->dir(), chosen);
    bool in_dir = auto_mode || (s.world->restart_count > 0 && std::filesystem::exists(newest));
    d = ckpt::CheckpointManager::load(in_dir ? newest : resume);
  }
  return d;
}

}  // namespace cohort::train
