#include "cohort/train/elastic_join.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cohort/core/logging.h"
#include "cohort/rendezvous/bootstrap.h"
#include "cohort/rendezvous/store.h"
#include "cohort/train/elastic.h"
#include "cohort/train/elastic_strategy.h"

namespace cohort::train {
namespace {

using Clock = std::chrono::steady_clock;

std::string job_prefix(const Trainer::State& s) {
  return detail::str("elastic/attempt", s.world->restart_count);
}

void broadcast_from_0(comm::ProcessGroup& g, void* data, size_t count, DType dtype) {
  if (count > 0) g.broadcast({.buffer = data, .count = count, .dtype = dtype, .root = 0});
}

// Rank 0's text to every rank (its length first).
void broadcast_text(comm::ProcessGroup& g, std::string& text) {
  int64_t n = int64_t(text.size());
  broadcast_from_0(g, &n, 1, DType::i64);
  text.resize(size_t(n));
  broadcast_from_0(g, text.data(), size_t(n), DType::u8);
}

// What a joiner needs besides the tensors: where training is, and the optimizer's slots.
nlohmann::json state_header(const Trainer::State& s, const optim::OptimizerState& opt,
                            int64_t workers) {
  nlohmann::json slots = nlohmann::json::array();
  for (const auto& [name, t] : opt.tensors)
    slots.push_back({{"name", name}, {"shape", t.shape()}, {"dtype", int(t.dtype())}});
  return {{"step", s.step},
          {"epoch", s.pos.epoch},
          {"batch_in_epoch", s.pos.batch_in_epoch},
          {"skip", s.pos.skip},
          {"workers", workers},
          {"samples", s.samples},
          {"train_seconds", s.train_seconds},
          {"loss_ema", s.loss_ema},
          {"optimizer_scalars", opt.scalars},
          {"optimizer_slots", slots}};
}

// Rank 0's training state to every rank of the (new) group: the header, the model's state
// (parameters and buffers, in state_dict order) and the optimizer's slots (in name order).
// Returns the workers that trained the epoch so far (`workers`, rank 0's). The workers already
// hold these values:
// only the joiners' change.
int64_t share_state(Trainer::State& s, int64_t workers) {
  comm::ProcessGroup& g = *s.world->group;
  const bool root = s.world->rank == 0;
  optim::OptimizerState opt;
  std::string text;
  if (root) {
    opt = s.opt->export_state();
    text = state_header(s, opt, workers).dump();
  }
  broadcast_text(g, text);
  const nlohmann::json h = nlohmann::json::parse(text);
  for (auto& [name, t] : s.model->state_dict())
    broadcast_from_0(g, t.raw_data(), size_t(t.numel()), t.dtype());
  if (!root) {
    for (const auto& slot : h.at("optimizer_slots"))
      opt.tensors[slot.at("name")] =
          zeros(slot.at("shape").get<Shape>(), DType(slot.at("dtype").get<int>()));
    opt.scalars = h.at("optimizer_scalars").get<std::map<std::string, double>>();
  }
  for (auto& [name, t] : opt.tensors)
    broadcast_from_0(g, t.raw_data(), size_t(t.numel()), t.dtype());
  if (!root) s.opt->import_state(opt);
  s.step = h.at("step").get<int64_t>();
  s.pos = {h.at("epoch").get<int64_t>(), h.at("batch_in_epoch").get<int64_t>(),
           h.at("skip").get<int64_t>()};
  s.samples = h.at("samples").get<int64_t>();
  s.train_seconds = h.at("train_seconds").get<double>();
  s.loss_ema = h.at("loss_ema").get<double>();
  return h.at("workers").get<int64_t>();
}

std::string slots_text(const std::vector<int>& slots) {
  std::string out;
  for (int r : slots) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

// Rank 0: the launcher ranks asking to join that are not members and not yet admitted.
std::vector<int64_t> asking(Trainer::State& s, int64_t total) {
  std::vector<int64_t> ask(size_t(total), -1);
  rendezvous::Store& store = *s.world->joined->store.store;
  const std::string p = job_prefix(s);
  const int64_t joins =
      store.check({p + "/joins"}) ? std::stoll(store.get_string(p + "/joins")) : 0;
  if (joins == s.elastic_joins_seen) return ask;
  s.elastic_joins_seen = joins;
  size_t k = 0;
  for (int slot = 0; slot < total; ++slot) {
    const auto& slots = s.world->slots;
    if (std::find(slots.begin(), slots.end(), slot) != slots.end()) continue;
    if (store.check({detail::str(p, "/join/", slot)}) &&
        !store.check({detail::str(p, "/admit/", slot)}))
      ask[k++] = slot;
  }
  return ask;
}

}  // namespace

void join_running_job(Trainer::State& s) {
  const auto start = Clock::now();
  rendezvous::Store& store = *s.world->joined->store.store;
  const std::string p = job_prefix(s);
  const int slot = s.world->rank;  // the launcher's rank of the worker this one replaces
  store.set_string(detail::str(p, "/join/", slot), "1");
  store.add(p + "/joins", 1);
  log::info("elastic", "launcher rank ", slot, " asks to join the running job");
  const auto timeout = std::chrono::milliseconds(int64_t(s.cfg.get_float("comm.timeout_s") * 1e3));
  std::istringstream admit(store.get_string(detail::str(p, "/admit/", slot), timeout));
  int generation = 0, rank = 0, size = 0;
  std::string slots;
  admit >> generation >> rank >> size >> slots;
  form_world(s, rank, size, generation);
  s.world->slots.clear();
  std::istringstream in(slots);
  for (std::string r; std::getline(in, r, ',');) s.world->slots.push_back(std::stoi(r));
  redeal_data(s, int(share_state(s, 0)));
  s.elastic_generation = generation;
  s.joined_running_job = true;
  s.start_step = s.last_saved_step = s.step;
  s.last_saved_pos = s.pos;
  log::info("elastic", "joined generation ", generation, " as rank ", rank, " of ", size,
            " at step ", s.step, " in ",
            std::chrono::duration<double>(Clock::now() - start).count(), " s");
}

void admit_pending_joiners(Trainer::State& s) {
  if (s.cfg.get_int("elastic.min_workers") <= 0 || !s.world->distributed()) return;
  const int64_t total = rendezvous::int_from_env(s.env, "COHORT_WORLD_SIZE", s.world->size);
  std::vector<int64_t> ask(size_t(total), -1);
  if (s.world->is_chief()) ask = asking(s, total);
  broadcast_from_0(*s.world->group, ask.data(), ask.size(), DType::i64);
  std::vector<int> joiners;
  for (int64_t a : ask)
    if (a >= 0) joiners.push_back(int(a));
  if (joiners.empty()) return;
  const auto start = Clock::now();
  const int generation = s.elastic_generation + 1, old_size = s.world->size;
  std::vector<int> slots = s.world->slots;
  slots.insert(slots.end(), joiners.begin(), joiners.end());
  const int new_size = int(slots.size());
  if (s.world->is_chief()) {
    rendezvous::Store& store = *s.world->joined->store.store;
    for (size_t k = 0; k < joiners.size(); ++k) {
      store.delete_key(detail::str(job_prefix(s), "/dead/", joiners[k]));  // alive again
      store.set_string(
          detail::str(job_prefix(s), "/admit/", joiners[k]),
          detail::str(generation, " ", old_size + int(k), " ", new_size, " ", slots_text(slots)));
    }
  }
  const int old_workers = s.world->data_size;
  // local_sgd, gossip: the members agree first (over the old world), so that rank 0's state,
  // which everyone receives below, is everyone's.
  average_parted_replicas(s);
  std::vector<int> everyone(static_cast<size_t>(old_size));
  for (int r = 0; r < old_size; ++r) everyone[size_t(r)] = r;
  gather_sharded_state(s, everyone);  // zero: rank 0's full state is what the joiners receive
  form_world(s, s.world->rank, new_size, generation);
  s.world->slots = slots;
  redeal_data(s, int(share_state(s, old_workers)));
  rebuild_strategy(s, /*average_replicas=*/false);
  log_membership(s, generation, old_size,
                 std::chrono::duration<double>(Clock::now() - start).count(),
                 detail::str("launcher rank(s) ", slots_text(joiners), " joined"));
  throw MembershipChanged{};
}

}  // namespace cohort::train
