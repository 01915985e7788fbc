#pragma once
// The launcher's part in an elastic job's membership round (train/elastic.h): a worker it left
// behind is marked dead in the job's store at once, so that the survivors' round does not wait
// for the worker's beat to go stale (elastic.detect_s / 2) before it closes.
#include <cstdint>
#include <string>

#include "cohort/net/secret.h"

namespace cohort::launch {

// "elastic/attempt<A>/dead/<rank>": what the survivors' round reads.
std::string elastic_dead_key(int attempt, int rank);

// Sets that key to `how` ("was killed by signal 9 (SIGKILL)") in the store at host:port. A
// store that cannot be reached is logged, not thrown: the round then waits for the beat.
void announce_left_behind(const std::string& host, uint16_t port, const net::Secret& secret,
                          int attempt, int rank, const std::string& how);

}  // namespace cohort::launch
