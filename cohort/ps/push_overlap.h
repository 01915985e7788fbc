#pragma once
// ps.overlap (docs/ps.md, "Overlap with backward"): a worker pushes server s's key range as
// soon as every gradient in that range is final during the synced backward, instead of
// pushing every range after backward. Backward computes later layers first and the layout puts
// them in the last servers' ranges, so with S >= 2 servers the last server's round trip runs
// while backward still computes the first layers.
//
// Exactness: a leaf's grad-ready hook fires once its gradient is summed over every use and
// every accumulated micro-batch; nothing writes .grad after that until the next zero_grad, so
// the bytes a hook-time push reads are the bytes step() would read. Worker-side clipping
// rewrites every gradient after backward, so the ps strategy does not overlap with
// optim.clip_grad_norm > 0 (it pushes in step(), as without overlap).
//
// A range that never completes (a parameter without a gradient this step, or one that is not
// a leaf requiring grad and so gets no hook) is pushed by step() (push_rest), from what
// gather_grads reads then (zeros for no gradient, as without overlap): no step waits on a hook
// that does not come.
//
// The hooks and the counting are the gradient-bucketing engine's (parallel/bucketing.h): one
// bucket per server, launched as soon as it is complete (Order::as_ready: each server has a
// lane of its own, so no order is needed for determinism), between arm() and disarm().
//
// Threads: hooks, arm/disarm and push_rest all run on the thread that calls backward() and
// step() (the engine runs hooks on the calling thread). The pushes themselves run on the
// worker's lanes (push_lanes.h); this class only decides when to start them.
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "cohort/parallel/bucketing.h"
#include "cohort/ps/partition.h"

namespace cohort::ps {

// By layout slot: the servers whose key range the slot's keys fall in (a slot may span
// servers, a server many slots): the bucket plan of the push overlap.
std::vector<std::vector<size_t>> servers_of_slots(const Layout& layout,
                                                  const std::vector<KeyRange>& ranges);

// Which servers' ranges have every layout slot that overlaps them ready (the engine's counter
// over servers_of_slots, by itself).
class RangeTracker {
 public:
  RangeTracker(const Layout& layout, const std::vector<KeyRange>& ranges);
  // A new backward: nothing ready.
  void reset() { counter_.reset(); }
  // Layout slot `slot`'s gradient is final; appends to *done the servers whose range it
  // completed. A slot seen twice counts once.
  void ready(size_t slot, std::vector<int>* done);

 private:
  parallel::ReadyCounter counter_;
  std::vector<size_t> completed_;
};

// The length of the union of [begin, end) intervals (ends before begins count as empty).
using TimeSpan =
    std::pair<std::chrono::steady_clock::time_point, std::chrono::steady_clock::time_point>;
double covered_seconds(std::vector<TimeSpan> spans);

// What one step's overlap came to, for the ps metrics.
struct OverlapStep {
  int64_t pushes_in_backward = 0;  // server pushes started from a grad-ready hook
  double hidden_s = 0;     // wall time those round trips ran while backward was still computing
  double push_pull_s = 0;  // from the first push's start to the last answer
};

class PushOverlap {
 public:
  using Clock = std::chrono::steady_clock;
  // Starts server i's push (gathers its range of the gradient, hands it to the worker).
  using StartPush = std::function<void(int server)>;

  PushOverlap(const Layout& layout, const std::vector<KeyRange>& ranges, StartPush start);
  // Registers a grad-ready hook on each layout slot's tensor (params: the list layout_of
  // saw) that is a leaf requiring grad. The hooks hold `self` weakly: after the strategy is
  // gone, a later backward of the same model runs them as no-ops.
  static void install(const std::shared_ptr<PushOverlap>& self, const NamedTensors& params,
                      const Layout& layout);

  // Around the synced backward: hooks start pushes only in between.
  void arm();
  void disarm();
  // step(): starts every push backward did not (all of them when no synced backward ran).
  void push_rest();
  bool any_started() const;
  // step(), once every answer is in (answered: by server, done: now): this step's overlap;
  // then ready for the next step.
  OverlapStep finish(const std::vector<Clock::time_point>& answered, Clock::time_point done);

 private:
  comm::Work start(size_t server);  // the engine's launch of bucket `server`

  std::shared_ptr<parallel::GradBucketing> engine_;
  StartPush start_;
  Clock::time_point backward_end_{};
  std::vector<bool> in_backward_;  // by server, this step
  std::vector<Clock::time_point> started_at_;
};

}  // namespace cohort::ps
