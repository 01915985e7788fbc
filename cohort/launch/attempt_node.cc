// Several nodes in an elastic job (LaunchOptions::elastic_min_nodes, `--nnodes MIN:MAX`;
// docs/elastic.md "Several nodes"). The store lives on node 0, and the workers' membership round
// runs in it (train/elastic.h): when the link between two nodes is cut, the side with the store
// can form a new membership (it goes on while it holds at least half of the workers), the other
// cannot reach the store (its workers' watchdogs name it and they stop). This launcher, on a node
// other than the store's host, then sees its workers fail while the store does not answer: it
// waits for the store and starts every worker of the node again to join the running job, which
// admits them at a step boundary (train/elastic_join.h).
#include <signal.h>

#include <cstdio>

#include "cohort/core/error.h"
#include "cohort/launch/attempt.h"
#include "cohort/launch/elastic_notice.h"

namespace cohort::launch::detail {
namespace {

using std::chrono::milliseconds;

// How long one look at the store may take, and how often the cut-off node looks.
constexpr milliseconds kProbeWithin{1'000};
constexpr milliseconds kProbePeriod{500};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

bool Attempt::cut_off_from_store(Worker& w) {
  if (options_.elastic_min_nodes <= 0 || plan_.host_store) return false;
  if (cut_off_since_) return true;  // another worker of the node, stopped with the others
  if (store_answers(plan_.store_host, port_, plan_.secret, kProbeWithin)) return false;
  cut_off_since_ = last_probe_ = Clock::now();
  std::fprintf(stderr,
               "cohort run: node %d is cut off from the store at %s:%u (rank %d %s): its workers "
               "stop; they rejoin the running job once the store answers again (waiting up to "
               "%.0f s)\n",
               options_.node_rank, plan_.store_host.c_str(), unsigned(port_), w.rank,
               describe_status(w.status).c_str(),
               std::chrono::duration<double>(options_.rejoin_timeout).count());
  std::fflush(stderr);
  for (auto& other : workers_)
    if (other->running) signal_group(other->proc.pid, SIGKILL);
  return true;
}

void Attempt::poll_rejoin() {
  if (!cut_off_since_ || any_running() || Clock::now() - last_probe_ < kProbePeriod) return;
  last_probe_ = Clock::now();
  if (!store_answers(plan_.store_host, port_, plan_.secret, kProbeWithin)) {
    if (Clock::now() - *cut_off_since_ < options_.rejoin_timeout) return;
    std::fprintf(stderr,
                 "cohort run: node %d could not reach the store at %s:%u for %.0f s: it gives "
                 "up (the job may have finished without it)\n",
                 options_.node_rank, plan_.store_host.c_str(), unsigned(port_),
                 seconds_since(*cut_off_since_));
    outcome_.failed_rank = workers_.front()->rank;
    outcome_.status = workers_.front()->status;
    cut_off_since_.reset();
    return;
  }
  std::fprintf(stderr,
               "cohort run: node %d reaches the store again after %.1f s: its %zu worker(s) "
               "rejoin the running job\n",
               options_.node_rank, seconds_since(*cut_off_since_), workers_.size());
  std::fflush(stderr);
  cut_off_since_.reset();
  for (auto& w : workers_) respawn_to_join(*w);
}

}  // namespace cohort::launch::detail
