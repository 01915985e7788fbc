#pragma once
// The launcher's part in an elastic job's membership round (train/elastic.h): a worker it left
// behind is marked dead in the job's store at once, so that the survivors' round does not wait
// for the worker's beat to go stale (elastic.detect_s / 2) before it closes.
#include <chrono>
#include <cstdint>
#include <string>

#include "cohort/net/secret.h"

namespace cohort::launch {

// "elastic/attempt<A>/dead/<rank>": what the survivors' round reads.
std::string elastic_dead_key(int attempt, int rank);
// "elastic/attempt<A>/chief": the launcher rank of a worker that took over as rank 0 (absent:
// launcher rank 0 is still rank 0).
std::string elastic_chief_key(int attempt);

// Sets the dead key to `how` ("was killed by signal 9 (SIGKILL)") in the store at host:port,
// and removes the rank's join and admit keys of an earlier join (train/elastic_join.h), so a
// replacement respawned for it asks afresh. A store that cannot be reached is logged, not
// thrown: the round then waits for the beat.
void announce_left_behind(const std::string& host, uint16_t port, const net::Secret& secret,
                          int attempt, int rank, const std::string& how);

// "elastic/attempt<A>/done": set by the job's rank 0 once it finished training (train/elastic.h).
std::string elastic_done_key(int attempt);
// Whether `key` is set in the store at host:port (false too when it cannot be reached).
bool store_has(const std::string& host, uint16_t port, const net::Secret& secret,
               const std::string& key);

// Whether the store at host:port answers (connects and authenticates) within `within`.
bool store_answers(const std::string& host, uint16_t port, const net::Secret& secret,
                   std::chrono::milliseconds within);

// The launcher rank that is the job's rank 0 now (the chief key, else 0; 0 too when the store
// cannot be reached).
int elastic_chief(const std::string& host, uint16_t port, const net::Secret& secret, int attempt);

}  // namespace cohort::launch
