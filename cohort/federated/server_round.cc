// FlServer::run_round: a plain round (task -> update) or a secure one (the four phases of
// secagg.h), each wait bounded by the round's deadline or, for the short key phases, by
// min(deadline, now + phase_timeout), so a client that dies early does not eat the time the
// others need to train.
#include <algorithm>
#include <cstring>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/federated/secagg.h"
#include "cohort/federated/server_round.h"
#include "cohort/net/secret.h"

namespace cohort::federated {
namespace {

uint64_t random_u64() {
  uint64_t v = 0;
  net::random_bytes({reinterpret_cast<uint8_t*>(&v), sizeof v});
  return v;
}

const char* expected_name(uint8_t phase) {
  if (phase == kClosedPhase) return "nothing (the round is closing)";
  return phase == 0 ? "an update" : phase_name(SecAggPhase(phase));
}

// The task id sits after the kind (1 byte) and the round (8 bytes): one encoding of the
// global model serves every client, each with its own id patched in.
constexpr size_t kTaskIdOffset = 1 + sizeof(int64_t);

}  // namespace

void check_expected(const FlServer::Round* r, uint32_t id, int64_t round, uint64_t task_id,
                    uint8_t phase, const char* what) {
  const std::string who = "client " + std::to_string(id);
  COHORT_CHECK_ARG(r != nullptr, what, " from ", who, " for round ", round,
                   " arrived when no round is open (stale or replayed)");
  COHORT_CHECK_ARG(round == r->round, what, " from ", who, " for round ", round,
                   " arrived during round ", r->round, " (stale or replayed)");
  auto it = r->task_ids.find(id);
  COHORT_CHECK_ARG(it != r->task_ids.end(), what, " from ", who, ", which round ", round,
                   " did not sample");
  COHORT_CHECK_ARG(it->second == task_id, what, " from ", who, " for round ", round,
                   " carries another task's id (replayed)");
  COHORT_CHECK_ARG(!r->gone.contains(id), what, " from ", who,
                   " on a connection the round already counted out");
  COHORT_CHECK_ARG(r->phase == phase, what, " from ", who, " out of turn: round ", round,
                   " now expects ", expected_name(r->phase));
  const bool twice = phase == 0 ? r->updates.contains(id) : r->answers.contains(id);
  COHORT_CHECK_ARG(!twice, who, " sent its ", what, " for round ", round, " twice (replayed)");
}

RoundResult FlServer::run_round(const RoundPlan& plan) {
  {
    std::lock_guard lock(mu_);
    open_ = std::make_unique<Round>();
    open_->round = plan.round;
    open_->phase = plan.settings.secure ? uint8_t(SecAggPhase::kAdvertise) : 0;
    for (uint32_t id : plan.sampled) {
      open_->task_ids[id] = random_u64();
      open_->reports[id].id = id;
      // Left between sampling and now: its task goes nowhere, so do not wait for it.
      if (!clients_.contains(id)) open_->gone.insert(id);
    }
  }
  RoundResult res;
  try {
    res = plan.settings.secure ? run_secure(plan) : run_plain(plan);
  } catch (const Error& e) {
    res.failure = e.what();  // e.g. secure aggregation short of its threshold
  }
  std::lock_guard lock(mu_);
  for (auto& [id, report] : open_->reports) {
    report.completed =
        std::find(res.contributors.begin(), res.contributors.end(), id) != res.contributors.end();
    if (report.completed) report.dropped_why.clear();
    res.clients.push_back(report);
  }
  open_.reset();
  return res;
}

void FlServer::send_tasks(const RoundPlan& plan) {
  Task t{plan.round, 0, plan.settings, plan.global};
  const Bytes encoded = encode(t);
  for (uint32_t id : plan.sampled) {
    Bytes b = encoded;
    uint64_t task_id = 0;
    ClientReport* report = nullptr;
    {
      std::lock_guard lock(mu_);
      task_id = open_->task_ids.at(id);
      report = &open_->reports.at(id);
    }
    std::memcpy(b.data() + kTaskIdOffset, &task_id, sizeof task_id);
    send_to(id, std::move(b), report);
  }
}

std::set<uint32_t> FlServer::wait_answers(const std::set<uint32_t>& expected,
                                          Clock::time_point deadline, uint8_t next_phase,
                                          std::map<uint32_t, Bytes>* answers) {
  std::unique_lock lock(mu_);
  Round& r = *open_;
  auto answered = [&](uint32_t id) {
    return r.phase == 0 ? r.updates.contains(id) : r.answers.contains(id);
  };
  cv_.wait_until(lock, deadline, [&] {
    return std::all_of(expected.begin(), expected.end(),
                       [&](uint32_t id) { return answered(id) || r.gone.contains(id); });
  });
  std::set<uint32_t> got;
  for (uint32_t id : expected) {
    if (answered(id)) {
      got.insert(id);
    } else {
      r.reports[id].dropped_why =
          r.gone.contains(id) ? "left during " + std::string(expected_name(r.phase))
                              : "missed the deadline of " + std::string(expected_name(r.phase));
    }
  }
  if (answers) *answers = std::move(r.answers);
  r.answers.clear();
  r.phase = next_phase;
  return got;
}

RoundResult FlServer::run_plain(const RoundPlan& plan) {
  send_tasks(plan);
  const std::set<uint32_t> sampled(plan.sampled.begin(), plan.sampled.end());
  wait_answers(sampled, plan.deadline, kClosedPhase, nullptr);
  RoundResult res;
  std::lock_guard lock(mu_);
  for (auto& [id, u] : open_->updates) {
    res.contributors.push_back(id);
    res.updates.push_back(std::move(u));
  }
  open_->updates.clear();
  return res;
}

RoundResult FlServer::run_secure(const RoundPlan& plan) {
  const auto key_deadline = [&] {
    return std::min(plan.deadline, Clock::now() + plan.phase_timeout);
  };
  secagg::Server sa(
      {uint64_t(plan.round), plan.settings.threshold, size_t(options_.layout.total) + 1});
  send_tasks(plan);
  const std::set<uint32_t> sampled(plan.sampled.begin(), plan.sampled.end());
  const std::set<uint32_t> u1 =
      secure_take(sa, sampled, key_deadline(), uint8_t(SecAggPhase::kShares));
  const Bytes roster = sa.roster();
  secure_send(u1, plan.round, SecAggPhase::kRoster, [&](uint32_t) { return roster; });
  const std::set<uint32_t> u2 = secure_take(sa, u1, key_deadline(), uint8_t(SecAggPhase::kMasked));
  sa.close_shares();
  secure_send(u2, plan.round, SecAggPhase::kSharesForYou,
              [&](uint32_t id) { return sa.shares_for(id); });
  const std::set<uint32_t> u3 = secure_take(sa, u2, plan.deadline, uint8_t(SecAggPhase::kUnmask));
  const Bytes survivors = sa.survivors();
  secure_send(u3, plan.round, SecAggPhase::kSurvivors, [&](uint32_t) { return survivors; });
  // Unmasking gets its own phase_timeout even when training used the round's whole deadline:
  // without it, one client that stays connected but never sends its masked input would leave
  // no time to unmask the others, and every secure round with a straggler would fail.
  secure_take(sa, u3, Clock::now() + plan.phase_timeout, kClosedPhase);
  RoundResult res;
  res.secure_sum = sa.aggregate();
  res.contributors = sa.contributors();
  return res;
}

std::set<uint32_t> FlServer::secure_take(secagg::Server& sa, const std::set<uint32_t>& expected,
                                         Clock::time_point deadline, uint8_t next_phase) {
  uint8_t phase = 0;
  {
    std::lock_guard lock(mu_);
    phase = open_->phase;
  }
  std::map<uint32_t, Bytes> answers;
  const std::set<uint32_t> got = wait_answers(expected, deadline, next_phase, &answers);
  std::set<uint32_t> accepted;
  for (auto& [id, body] : answers) {
    try {
      switch (SecAggPhase(phase)) {
        case SecAggPhase::kAdvertise:
          sa.add_advertise(id, body);
          break;
        case SecAggPhase::kShares:
          sa.add_shares(id, body);
          break;
        case SecAggPhase::kMasked:
          sa.add_masked(id, body);
          break;
        case SecAggPhase::kUnmask:
          sa.add_unmask(id, body);
          break;
        default:
          COHORT_INTERNAL(false, "secure aggregation: no client phase ", int(phase));
      }
      accepted.insert(id);
    } catch (const InvalidArgument& e) {
      log::warn("fl", "refused client ", id, "'s ", phase_name(SecAggPhase(phase)), ": ", e.what());
      std::lock_guard lock(mu_);
      ++refused_;
      open_->reports[id].dropped_why = e.what();
    }
  }
  (void)got;
  return accepted;
}

void FlServer::secure_send(const std::set<uint32_t>& to, int64_t round, SecAggPhase phase,
                           const std::function<Bytes(uint32_t)>& body_for) {
  for (uint32_t id : to) {
    SecAggMsg m;
    m.client_id = id;
    m.round = round;
    m.phase = phase;
    ClientReport* report = nullptr;
    {
      std::lock_guard lock(mu_);
      m.task_id = open_->task_ids.at(id);
      report = &open_->reports.at(id);
    }
    m.body = body_for(id);
    send_to(id, encode(m), report);
  }
}

}  // namespace cohort::federated
