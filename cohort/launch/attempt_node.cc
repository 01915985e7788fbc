// Several nodes in an elastic job (LaunchOptions::elastic_min_nodes, `--nnodes MIN:MAX`;
// docs/elastic.md "Several nodes"). The store lives on node 0, and the workers' membership round
// runs in it (train/elastic.h): when the link between two nodes is cut, the side with the store
// can form a new membership (it goes on while it holds at least half of the workers), the other
// cannot reach the store (its workers' watchdogs name it and they stop). This launcher, on a node
// other than the store's host, then sees its workers fail while the store does not answer: it
// waits for the store and starts every worker of the node again to join the running job, which
// admits them at a step boundary (train/elastic_join.h).
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>

#include "cohort/core/error.h"
#include "cohort/launch/attempt.h"
#include "cohort/launch/elastic_notice.h"
#include "cohort/launch/torch_env.h"

namespace cohort::launch::detail {
namespace {

using std::chrono::milliseconds;

// How long one look at the store may take, and how often the cut-off node looks.
constexpr milliseconds kProbeWithin{1'000};
constexpr milliseconds kProbePeriod{500};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The worker said it stopped because it could not reach the store (train/elastic.cc).
bool said_cut_off(const LineTail& tail) {
  for (const std::string& line : tail.lines())
    if (line.find("is cut off from the job's store") != std::string::npos) return true;
  return false;
}

}  // namespace

bool Attempt::cut_off_from_store(Worker& w) {
  if (options_.elastic_min_nodes <= 0 || plan_.host_store) return false;
  if (cut_off_since_) return true;  // another worker of the node, stopped with the others
  // Its own word, or a store that does not answer now (a crash as the link went down).
  if (!said_cut_off(w.tail) && store_answers(plan_.store_host, port_, plan_.secret, kProbeWithin))
    return false;
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
  auto end_attempt = [this](const std::string& why, bool failed) {
    std::fprintf(stderr, "cohort run: node %d %s\n", options_.node_rank, why.c_str());
    std::fflush(stderr);
    if (failed) {
      outcome_.failed_rank = workers_.front()->rank;
      outcome_.status = 1 << 8;  // exit code 1: the node could not rejoin (said above)
    }
    cut_off_since_.reset();
  };
  const std::string& host = plan_.store_host;
  if (!store_answers(host, port_, plan_.secret, kProbeWithin)) {
    if (Clock::now() - *cut_off_since_ >= options_.rejoin_timeout)
      end_attempt(cohort::detail::str("could not reach the store at ", host, ":", port_, " for ",
                                      int(seconds_since(*cut_off_since_)), " s: it gives up (the ",
                                      "job may have finished without it)"),
                  true);
    return;
  }
  if (store_has(host, port_, plan_.secret, elastic_done_key(restart_)))
    return end_attempt("reaches the store again: the job finished without it", false);
  // Node 0 restarted the job meanwhile (--max-restarts): this attempt is over here too.
  if (store_has(host, port_, plan_.secret, torch_port_key(restart_ + 1)))
    return end_attempt("reaches the store again, but node 0 restarted the job meanwhile", true);
  std::fprintf(stderr,
               "cohort run: node %d reaches the store again after %.1f s: its %zu worker(s) "
               "rejoin the running job\n",
               options_.node_rank, seconds_since(*cut_off_since_), workers_.size());
  std::fflush(stderr);
  cut_off_since_.reset();
  for (auto& w : workers_) respawn_to_join(*w);
}

namespace {

bool finished_cleanly(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

bool Attempt::serving_the_others() const {
  if (options_.elastic_min_nodes <= 0 || !plan_.host_store || lost_rank_ < 0 || !store_clients_ ||
      any_running())
    return false;
  for (auto& w : workers_)
    if (finished_cleanly(w->status)) return false;  // this node saw the job end
  return store_clients_() > 0;
}

void Attempt::judge_lost_node() {
  if (options_.elastic_min_nodes <= 0 || lost_rank_ < 0 || outcome_.failed_rank >= 0 ||
      outcome_.signal != 0 || any_running())
    return;
  for (auto& w : workers_)
    if (finished_cleanly(w->status)) return;  // a worker of this node finished with the job
  if (store_has(plan_.store_host, port_, plan_.secret, elastic_done_key(restart_))) {
    std::fprintf(stderr,
                 "cohort run: node %d's workers were all lost; the job finished without "
                 "them\n",
                 options_.node_rank);
    return;
  }
  std::fprintf(stderr, "cohort run: node %d's workers were all lost (rank %d %s %s first)%s\n",
               options_.node_rank, lost_rank_,
               WIFSIGNALED(lost_status_) ? "was killed by" : "exited with",
               describe_status(lost_status_).c_str(),
               plan_.host_store ? ", and no worker of the job is connected to its store" : "");
  outcome_.failed_rank = lost_rank_;
  outcome_.status = lost_status_;
}

}  // namespace cohort::launch::detail
