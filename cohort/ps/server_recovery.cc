// ParamServer's recovery (server.h, "Recovery"): its progress and clocks, the checkpoints it
// writes after updates and goodbyes, and what a restarted server, or a server of a resumed job,
// restores.
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cohort/ckpt/checkpoint_aside.h"
#include "cohort/core/logging.h"
#include "cohort/ps/server.h"

namespace cohort::ps {

ServerSnapshot ParamServer::shape() const {
  return {.index = o_.index,
          .num_servers = o_.num_servers,
          .num_workers = o_.num_workers,
          .range = range_};
}

int64_t ParamServer::progress() const {
  return o_.consistency.mode == Mode::kBsp ? step_ : version_ / o_.num_workers;
}

int64_t ParamServer::next_step(int rank) const {
  return o_.consistency.mode == Mode::kBsp ? step_ : gate_.clock(rank);
}

std::vector<int64_t> ParamServer::clocks() const {
  std::vector<int64_t> c;
  for (int r = 0; r < o_.num_workers; ++r) c.push_back(next_step(r));
  return c;
}

void ParamServer::after_update() {
  const int64_t now = progress();
  if (ckpt_ && now / o_.ckpt_every > checkpointed_at_ / o_.ckpt_every) save_checkpoint();
  if (o_.after_update) o_.after_update(now);
}

void ParamServer::save_checkpoint() {
  ServerSnapshot s{o_.index,
                   o_.num_servers,
                   o_.num_workers,
                   range_,
                   step_,
                   version_,
                   clocks(),
                   sent_version_,
                   std::vector<int>(said_bye_.begin(), said_bye_.end()),
                   shard_,
                   opt_->export_state()};
  try {
    // Named by a sequence number, not the version: a re-save (a bye, no update since) never
    // replaces the directory a worker was told is durable.
    ckpt_->save(to_checkpoint(s, saves_ + 1));  // synchronous: durable once it returns
  } catch (const std::exception& e) {
    // The workers keep their pushes longer (durable_ stays); the handler carries on.
    log::error("ps", who(), ": checkpoint failed (the workers keep their pushes): ", e.what());
    return;
  }
  ++saves_;
  durable_ = s.clocks;
  checkpointed_at_ = progress();
}

namespace {

// The number in a checkpoint directory's name (step-<n>), or -1.
int64_t dir_number(const std::string& dir) {
  long long n = -1;
  if (std::sscanf(std::filesystem::path(dir).filename().c_str(), "step-%lld", &n) != 1) return -1;
  return n;
}

}  // namespace

// Every checkpoint that verifies is offered to the choice (its data is not kept: one is loaded
// again once chosen); every directory numbered above the choice is moved into a new generation
// <dir>.earlier/<n>/ (ckpt/checkpoint_aside.h), verifying or not, so that retention never keeps
// an abandoned one over the saves to come; nobody asked for it to be deleted.
std::optional<ckpt::CheckpointData> ParamServer::load_chosen() {
  std::vector<SavedCheckpoint> saved;
  const ServerSnapshot expect = shape();
  for (const std::string& dir : ckpt_->list()) {
    try {
      const ckpt::CheckpointData d = ckpt::CheckpointManager::load(dir);
      const ServerSnapshot s = from_checkpoint(d, expect);
      const int64_t progress =
          o_.consistency.mode == Mode::kBsp ? s.step : s.version / o_.num_workers;
      saved.push_back({dir, d.step, progress});
    } catch (const std::exception& e) {
      log::warn("ps", who(), ": skipping checkpoint ", dir, ": ", e.what());
    }
  }
  const int pick = o_.choose_checkpoint(saved);  // throws when the servers cannot agree
  if (pick < 0) return std::nullopt;             // nothing to resume from: nothing to remove
  const SavedCheckpoint& chosen = saved.at(size_t(pick));
  std::vector<std::string> newer;
  for (const std::string& dir : ckpt_->list())
    if (dir_number(dir) > chosen.number) newer.push_back(dir);
  const std::string to = ckpt::move_aside(newer, ckpt::earlier_root(o_.ckpt_dir));
  for (const std::string& dir : newer)
    log::info("ps", who(), ": moved ", dir, ", newer than the checkpoint the job resumes from, to ",
              to);
  return ckpt::CheckpointManager::load(chosen.dir);
}

void ParamServer::restore_newest() {
  std::optional<ckpt::CheckpointData> d =
      o_.choose_checkpoint ? load_chosen() : ckpt_->load_latest();
  if (!d) {
    log::warn("ps", who(), ": restarted, but ", o_.ckpt_dir,
              " holds no checkpoint that verifies; starting from the initial values");
    return;
  }
  const ServerSnapshot s = from_checkpoint(*d, shape());
  saves_ = d->step;
  std::memcpy(shard_.data<float>(), s.shard.data<float>(), size_t(range_.size()) * sizeof(float));
  opt_->import_state(s.optimizer);
  step_ = s.step;
  version_ = s.version;
  sent_version_ = s.sent_version;
  gate_.restore(s.clocks);
  // A server restarted alone keeps who finished (they do not come back); a whole job resumed
  // (choose_checkpoint) starts every worker again, and each says goodbye again.
  for (int r : o_.choose_checkpoint ? std::vector<int>{} : s.said_bye) {
    said_bye_.insert(r);
    gate_.leave(r);
  }
  durable_ = s.clocks;
  checkpointed_at_ = progress();
  log::info("ps", who(), ": restarted from its checkpoint of version ", version_, " (step ",
            progress(), ") in ", o_.ckpt_dir, "/", ckpt::step_dir_name(saves_));
}

}  // namespace cohort::ps
