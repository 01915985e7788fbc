#include "cohort/train/elastic.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <thread>

#include "cohort/comm/communicator.h"
#include "cohort/comm/liveness.h"
#include "cohort/core/logging.h"
#include "cohort/metrics/sink.h"
#include "cohort/rendezvous/bootstrap.h"
#include "cohort/rendezvous/store.h"
#include "cohort/train/components.h"
#include "cohort/train/elastic_strategy.h"

namespace cohort::train {
namespace {

using Clock = std::chrono::steady_clock;

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

std::vector<int> parse_ranks(const std::string& text) {
  std::vector<int> out;
  std::istringstream in(text);
  for (std::string r; std::getline(in, r, ',');) out.push_back(std::stoi(r));
  return out;
}

rendezvous::Bytes bytes_of(const std::string& s) {
  return rendezvous::Bytes(s.begin(), s.end());
}

// The members of the round under `prefix`: waits until every old rank has arrived, or until
// every rank still missing is dead (the launcher marked it, launch/elastic_notice.h: "<dead>/
// dead/<rank>") or has not beaten for `stale` (stopped, cut off), then proposes the arrivals;
// the first proposal written is everyone's answer.
std::vector<int> settle_members(rendezvous::Store& store, const std::string& prefix,
                                const std::string& dead, const std::string& beats, int old_size,
                                std::chrono::milliseconds stale, Clock::time_point give_up) {
  const std::string members_key = prefix + "/members";
  std::vector<int64_t> beat(size_t(old_size), -1);
  std::vector<Clock::time_point> moved(size_t(old_size), Clock::now());
  for (;;) {
    if (store.check({members_key})) break;
    std::vector<int> arrived;
    bool missing_alive = false;
    const Clock::time_point now = Clock::now();
    for (int r = 0; r < old_size; ++r) {
      if (store.check({detail::str(prefix, "/member/", r)})) {
        arrived.push_back(r);
        continue;
      }
      if (store.check({detail::str(dead, "/dead/", r)})) continue;  // the launcher saw it die
      const std::string key = detail::str(beats, "/beat/", r);
      const int64_t count = store.check({key}) ? std::stoll(store.get_string(key)) : -1;
      if (count != beat[size_t(r)]) beat[size_t(r)] = count, moved[size_t(r)] = now;
      missing_alive = missing_alive || now - moved[size_t(r)] < stale;
    }
    if (int(arrived.size()) == old_size || !missing_alive || now >= give_up) {
      store.compare_set(members_key, {}, bytes_of(ranks_text(arrived)));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return parse_ranks(store.get_string(members_key));
}

// The refusals of the header, naming what is missing.
void check_can_go_on(const Trainer::State& s, const std::vector<int>& members, int old_size,
                     int generation, const std::string& why) {
  const int old_rank = s.world->rank;
  const std::string lost = [&] {
    std::string out;
    for (int r = 0; r < old_size; ++r)
      if (std::find(members.begin(), members.end(), r) == members.end())
        out += (out.empty() ? "" : ", ") + std::to_string(r);
    return out;
  }();
  COHORT_CHECK_IO(std::find(members.begin(), members.end(), old_rank) != members.end(),
                  "elastic: rank ", old_rank, " was dropped: the others formed generation ",
                  generation, " without it (", ranks_text(members), "); it stops");
  const int64_t min_workers = s.cfg.get_int("elastic.min_workers");
  // The store must outlive rank 0: cohort's launcher hosts it (COHORT_STORE_EXTERNAL=1).
  COHORT_CHECK_IO(
      members.front() == 0 || rendezvous::int_from_env(s.env, "COHORT_STORE_EXTERNAL", 0) == 1,
      "elastic: rank 0 was lost (", why, ") and it hosted the job's store: the job ",
      "stops (launch with cohort's launcher, which hosts the store, to go on)");
  COHORT_CHECK_IO(
      int64_t(members.size()) >= min_workers && 2 * members.size() >= size_t(old_size),
      "elastic: only ", members.size(), " of ", old_size, " workers are left (lost: ", lost,
      "), fewer than elastic.min_workers = ", min_workers, " or than half: the job stops");
}

// Every member's last completed step must be this one's: the replicas are then equal.
void check_same_step(rendezvous::Store& store, const std::string& prefix,
                     const std::vector<int>& members, int64_t step) {
  for (int r : members) {
    const int64_t theirs = std::stoll(store.get_string(detail::str(prefix, "/member/", r)));
    COHORT_CHECK_IO(theirs == step, "elastic: rank ", r, " completed step ", theirs,
                    " and this worker step ", step, ": a worker was lost inside a step's last ",
                    "collective and the replicas differ; the job stops (--max-restarts ",
                    "restarts it from the last checkpoint)");
  }
}

// What the new world trains: the same global batch over other workers, or the rest of the
// epoch over the workers left.
std::string dealt_text(const Trainer::State& s) {
  if (s.batch_slots > 0)
    return detail::str("the global batch stays ", s.batch_slots * s.batch, " samples (",
                       s.batch_slots, " slots of ", s.batch, " over ", s.world->size, " workers)");
  if (s.data.is_text)
    return detail::str("the global batch is now ", s.world->size * s.batch, " windows");
  return detail::str("the rest of epoch ", s.pos.epoch, " (", s.data.train->size() - s.pos.skip,
                     " samples) is dealt to them");
}

// A file whose last line is not ended (its writer was killed inside it) gets its newline.
void end_torn_line(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "a+");
  if (f == nullptr) return;  // the sink's own open names the problem
  if (std::fseek(f, -1, SEEK_END) == 0 && std::fgetc(f) != '\n' &&
      std::fseek(f, 0, SEEK_END) == 0)  // a read is followed by a write only after a seek
    std::fputc('\n', f);
  std::fclose(f);
}

// The lowest member of a world that lost rank 0 becomes rank 0: from now on it writes the
// checkpoints, the evaluations and the job's metrics.jsonl (appending to the lost rank 0's).
void take_over_as_rank_0(Trainer::State& s, int old_rank) {
  s.metrics_file = (std::filesystem::path(s.run_dir) / "metrics.jsonl").string();
  end_torn_line(s.metrics_file);  // a line the lost rank 0 was writing stays apart
  s.log.add(std::make_unique<metrics::JsonlFile>(s.metrics_file));
  // The launcher waits for this worker's exit, not launcher rank 0's, to end the job.
  s.world->joined->store.store->set_string(
      detail::str("elastic/attempt", s.world->restart_count, "/chief"),
      std::to_string(s.world->slots.front()));
  log::warn("elastic", "rank ", old_rank, " takes over as rank 0 (rank 0 was lost): it writes the ",
            "checkpoints and ", s.metrics_file, " from now on");
}

// local_sgd, gossip: a member whose neighbours finished their exchange may be one step ahead
// of the lost worker's neighbours (their exchanges fail, its own did not). The replicas are
// averaged next anyway: the members behind take the step as done (their own update of it is
// lost in the average), so all go on from the furthest step.
void catch_up_with_the_furthest(rendezvous::Store& store, const std::string& prefix,
                                const std::vector<int>& members, Trainer::State& s) {
  int64_t furthest = s.step;
  for (int r : members)
    furthest = std::max<int64_t>(furthest,
                                 std::stoll(store.get_string(detail::str(prefix, "/member/", r))));
  if (furthest == s.step) return;
  COHORT_CHECK_IO(furthest == s.step + 1, "elastic: a member completed step ", furthest,
                  " and this worker step ", s.step, ": more than one step apart; the job stops");
  ++s.step;
  s.pos.batch_in_epoch += s.grad_accum;
}

}  // namespace

std::string round_prefix(const Trainer::State& s, int generation) {
  return detail::str("elastic/attempt", s.world->restart_count, "/gen", generation);
}

// The new world: a communicator of `new_size` with this worker as `new_rank`, its group, and a
// watchdog; the old ones (if any) go first.
void form_world(Trainer::State& s, int new_rank, int new_size, int generation) {
  TrainWorld& w = *s.world;
  comm::World& joined = *w.joined;
  std::shared_ptr<rendezvous::Store> store = joined.store.store;
  comm::CommOptions co = joined.comm ? joined.comm->options() : joined.options;
  co.prefix = detail::str("world/attempt", w.restart_count, "/gen", generation);
  w.liveness.reset();  // the old beats stop; the new world beats under a new prefix
  w.group.reset();
  joined.group.reset();
  joined.comm.reset();
  joined.comm = comm::Communicator::create(store, new_rank, new_size, co);
  calibrate(s.cfg, *joined.comm, s.env);  // the cost model of this world size, as at the start
  joined.group = comm::make_process_group(joined.comm);
  joined.rank = w.rank = w.data_rank = new_rank;
  joined.size = w.size = w.data_size = new_size;
  w.group = joined.group;
  w.liveness = watch_liveness(s.cfg, w, generation);
}

// The rest of the current epoch (s.pos, trained by `old_workers`), dealt to the new world; the
// step counts from there.
void redeal_data(Trainer::State& s, int old_workers) {
  if (s.data.is_text) {  // a step's rows depend on the step alone (draw_text_step)
    s.resume_pos = s.pos;
    return;
  }
  if (s.batch_slots > 0) {  // the slots are dealt anew; the position means what it meant
    if (s.pos.batch_in_epoch >= s.batches_per_epoch) s.pos = {s.pos.epoch + 1, 0, 0};
    s.resume_pos = s.pos;
    return;
  }
  const int64_t n = s.data.train->size();
  LoopPosition pos = s.pos;
  int64_t consumed = pos.skip + pos.batch_in_epoch * s.batch * old_workers;
  if (consumed >= n) pos = {pos.epoch + 1, 0, 0}, consumed = 0;
  s.resume_pos = s.pos = {pos.epoch, 0, consumed};
  const int64_t workers = s.world->data_size;
  const int64_t per_worker = (n - consumed + workers - 1) / workers;
  const int64_t rest_of_epoch = (per_worker + s.batch - 1) / s.batch;
  s.batches_per_epoch = ((n + workers - 1) / workers + s.batch - 1) / s.batch;
  s.steps_per_epoch = s.batches_per_epoch;  // train.grad_accum_steps = 1 (checked)
  const int64_t epochs_after = s.cfg.get_int("train.epochs") - pos.epoch - 1;
  s.total_steps = s.step + rest_of_epoch + std::max<int64_t>(0, epochs_after) * s.steps_per_epoch;
  const int64_t max_steps = s.cfg.get_int("train.max_steps");
  if (max_steps > 0) s.total_steps = std::min(s.total_steps, max_steps);
}

void log_membership(Trainer::State& s, int generation, int previous, double took,
                    const std::string& why) {
  s.elastic_generation = generation;
  s.elastic_recover_s += took;
  if (s.world->is_chief()) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", took);
    log::warn("elastic", "generation ", generation, ": ", s.world->size, " workers (", previous,
              " before) go on from step ", s.step, " (launcher ranks ", ranks_text(s.world->slots),
              "), recovered in ", secs, " s; ", dealt_text(s));
  }
  s.log.write({{"event", "membership"},
               {"generation", generation},
               {"step", s.step},
               {"workers", s.world->size},
               {"previous_workers", previous},
               {"members", s.world->slots},
               {"recover_s", took},
               {"reason", why},
               {"time_s", std::chrono::duration<double>(Clock::now() - s.start).count()}});
}

void announce_job_done(Trainer::State& s) {
  if (s.cfg.get_int("elastic.min_workers") <= 0 || !s.world->is_chief() || !s.world->joined ||
      !s.world->joined->store.store)
    return;
  s.world->joined->store.store->set_string(
      detail::str("elastic/attempt", s.world->restart_count, "/done"), "1");
}

std::string elastic_round_key(int restart_count, int generation) {
  return detail::str("elastic/attempt", restart_count, "/gen", generation, "/open");
}

bool can_recover_in_place(const Trainer::State& s) {
  return s.cfg.get_int("elastic.min_workers") > 0 && s.world->distributed() && !s.data.sharded &&
         s.world->joined && s.world->joined->comm && s.world->size > 1;
}

void check_elastic_config(const Config& cfg) {
  if (cfg.get_bool("elastic.exact")) {
    COHORT_CHECK_ARG(cfg.get_int("elastic.min_workers") > 0, "config: elastic.exact is a mode ",
                     "of in-place recovery: set elastic.min_workers too (docs/elastic.md)");
    COHORT_CHECK_ARG(cfg.get_bool("elastic.fixed_batch"), "config: elastic.exact needs ",
                     "elastic.fixed_batch = true: the slots it sums in order are those of the ",
                     "fixed global batch");
  }
  if (cfg.get_int("elastic.min_workers") <= 0) return;
  COHORT_CHECK_ARG(
      recovers_in_place(cfg.get_string("parallel.strategy")),
      "config: elastic.min_workers (in-place recovery) works with parallel.strategy = ",
      kElasticStrategies, " so far, not \"", cfg.get_string("parallel.strategy"),
      "\" (docs/elastic.md)");
  COHORT_CHECK_ARG(!cfg.get_bool("elastic.exact") || cfg.get_string("parallel.strategy") == "ddp",
                   "config: elastic.exact works with parallel.strategy = \"ddp\" (the slots' "
                   "gradients are what it sums in order)");
  COHORT_CHECK_ARG(cfg.get_int("train.grad_accum_steps") == 1, "config: elastic.min_workers ",
                   "needs train.grad_accum_steps = 1 so far (docs/elastic.md)");
  COHORT_CHECK_ARG(cfg.get_float("elastic.detect_s") > 0, "config: elastic.min_workers needs ",
                   "liveness: elastic.detect_s > 0");
  COHORT_CHECK_ARG(cfg.get_string("comm.backend") == "native", "config: elastic.min_workers ",
                   "needs comm.backend = \"native\"");
  COHORT_CHECK_ARG(cfg.get_string("run.device") == "cpu", "config: elastic.min_workers works ",
                   "on run.device = \"cpu\" so far");
}

void recover_in_place(Trainer::State& s, const std::string& why) {
  // Cut off from the store (its own watchdog said so): the round cannot be joined, and its
  // calls would wait out comm.timeout_s. The side with the store decides (docs/elastic.md).
  if (s.world->liveness && s.world->liveness->lost().store_unreachable)
    throw IoError(detail::str("elastic: rank ", s.world->rank, " is cut off from the job's ",
                              "store (", s.world->liveness->lost().reason, "): it stops; the ",
                              "workers that reach the store decide whether the job goes on"));
  const auto start = Clock::now();
  const int generation = s.elastic_generation + 1;
  const int old_rank = s.world->rank, old_size = s.world->size;
  const std::string prefix = round_prefix(s, generation);
  rendezvous::Store& store = *s.world->joined->store.store;
  store.compare_set(prefix + "/open", {}, bytes_of(detail::str("rank ", old_rank, ": ", why)));
  complete_interrupted_step(s);  // before the step is compared
  store.set_string(detail::str(prefix, "/member/", old_rank), std::to_string(s.step));
  const auto detect = std::chrono::milliseconds(int64_t(s.cfg.get_float("elastic.detect_s") * 1e3));
  const auto give_up =
      start + std::chrono::milliseconds(int64_t(s.cfg.get_float("comm.timeout_s") * 1e3));
  const std::string dead = detail::str("elastic/attempt", s.world->restart_count);
  const std::vector<int> members =
      settle_members(store, prefix, dead, s.world->liveness_prefix, old_size, detect / 2, give_up);
  check_can_go_on(s, members, old_size, generation, why);
  if (replicas_part(s))
    catch_up_with_the_furthest(store, prefix, members, s);
  else
    check_same_step(store, prefix, members, s.step);
  const int old_workers = s.world->data_size;
  std::vector<int> slots;
  for (int r : members) slots.push_back(s.world->slots[size_t(r)]);
  const int new_rank = int(std::find(members.begin(), members.end(), old_rank) - members.begin());
  form_world(s, new_rank, int(members.size()), generation);
  s.world->slots = slots;
  if (old_rank != 0 && new_rank == 0) take_over_as_rank_0(s, old_rank);
  redeal_data(s, old_workers);
  gather_sharded_state(s, members);
  rebuild_strategy(s, /*average_replicas=*/true);
  log_membership(s, generation, old_size,
                 std::chrono::duration<double>(Clock::now() - start).count(), why);
}

}  // namespace cohort::train
