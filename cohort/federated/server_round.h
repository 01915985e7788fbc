#pragma once
// The round in progress, as FlServer's handlers and run_round() share it (under FlServer::mu_).
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "cohort/federated/server.h"

namespace cohort::federated {

struct FlServer::Round {
  int64_t round = 0;
  // What clients are expected to send now: 0 for a plain update, else a SecAggPhase.
  uint8_t phase = 0;
  std::map<uint32_t, uint64_t> task_ids;  // sampled client -> its task id
  std::map<uint32_t, ClientReport> reports;
  std::map<uint32_t, Update> updates;  // plain rounds
  std::map<uint32_t, Bytes> answers;   // this secure phase's messages
  std::set<uint32_t> gone;             // left during the round
};

// InvalidArgument unless client `id` has an open task (round, task_id) that expects `phase` now
// and has not answered it yet: what refuses replays, stale updates and out-of-turn messages.
void check_expected(const FlServer::Round* r, uint32_t id, int64_t round, uint64_t task_id,
                    uint8_t phase, const char* what);

}  // namespace cohort::federated
