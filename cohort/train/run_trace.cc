#include "cohort/train/run_trace.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cohort/core/logging.h"

namespace cohort::train {
namespace {

namespace fs = std::filesystem;

// Turns a module's scope begin/end into a span named "<pass> <module>" (category "module").
// Forward and backward each nest properly on the training thread, so one stack of start times
// pairs them.
class ModuleTracer final : public autograd::ScopeObserver {
 public:
  explicit ModuleTracer(metrics::Tracer& tracer) : tracer_(tracer) {}
  void begin(const autograd::Scope&, autograd::Pass) override {
    starts_.push_back(metrics::Tracer::Clock::now());
  }
  void end(const autograd::Scope& scope, autograd::Pass pass) override {
    if (starts_.empty()) return;  // unbalanced: a scope attached mid-forward
    auto start = starts_.back();
    starts_.pop_back();
    const char* what = pass == autograd::Pass::forward ? "forward " : "backward ";
    tracer_.complete(what + scope.name, "module", start, metrics::Tracer::Clock::now());
  }

 private:
  metrics::Tracer& tracer_;
  std::vector<metrics::Tracer::Clock::time_point> starts_;
};

// Each module down to `depth` levels below the root gets a scope. Nesting comes from the calls
// themselves (autograd::ScopeGuard): the MLP calls its layers directly, not through their
// Sequential, so "layers" shows no span of its own.
void attach_scopes(nn::Module& model, int64_t depth,
                   const std::shared_ptr<autograd::ScopeObserver>& observer) {
  for (auto& [name, m] : model.named_modules()) {
    if (name.empty() || std::count(name.begin(), name.end(), '.') >= depth) continue;
    m->set_trace_scope(std::make_shared<autograd::Scope>(autograd::Scope{name, nullptr, observer}));
  }
}

// Cristian's algorithm, rank 0 the reference: each other rank in turn sends kRounds requests
// and rank 0 answers each with its clock; the round with the smallest round trip wins.
metrics::ClockOffset estimate_clock_offset(comm::ProcessGroup& g) {
  constexpr int kRounds = 8;
  constexpr uint32_t kTag = 0x7472;  // "tr": no other point-to-point traffic at start-up
  double value = 0;
  auto send = [&](int peer) {
    g.send({.buffer = &value, .count = 1, .dtype = comm::DType::f64, .peer = peer, .tag = kTag});
  };
  auto recv = [&](int peer) {
    g.recv({.buffer = &value, .count = 1, .dtype = comm::DType::f64, .peer = peer, .tag = kTag});
  };
  if (g.rank() == 0) {
    for (int r = 1; r < g.size(); ++r) {
      for (int k = 0; k < kRounds; ++k) {
        recv(r);
        value = metrics::Tracer::now_us();
        send(r);
      }
    }
    return {.offset_us = 0, .uncertainty_us = 0, .rounds = 0};
  }
  std::vector<metrics::ClockRound> rounds;
  for (int k = 0; k < kRounds; ++k) {
    metrics::ClockRound round{.sent_us = metrics::Tracer::now_us()};
    send(0);
    recv(0);
    round.received_us = metrics::Tracer::now_us();
    round.reference_us = value;
    rounds.push_back(round);
  }
  return metrics::estimate_offset(rounds);
}

std::string rank_file(const Trainer::State& s, int rank) {
  return (fs::path(s.run_dir) / detail::str("trace.rank", rank, ".json")).string();
}

}  // namespace

void start_trace(Trainer::State& s) {
  if (!s.cfg.get_bool("run.trace")) return;
  // A file left by an earlier run of this name must not be merged as this run's.
  std::error_code ec;
  std::filesystem::remove(rank_file(s, s.world->rank), ec);
  s.tracer = std::make_unique<metrics::Tracer>(metrics::TracerOptions{
      .rank = s.world->rank, .max_events = size_t(s.cfg.get_int("run.trace_max_events"))});
  // Without a group (parameter-server workers) the offset stays 0 with unknown uncertainty;
  // a job of one process is its own reference.
  metrics::ClockOffset offset{
      .offset_us = 0, .uncertainty_us = s.world->size > 1 ? -1.0 : 0.0, .rounds = 0};
  if (s.world->distributed()) offset = estimate_clock_offset(*s.world->group);
  s.tracer->set_clock_offset(offset);
  s.module_tracer = std::make_shared<ModuleTracer>(*s.tracer);
  attach_scopes(*s.model, s.cfg.get_int("run.trace_module_depth"), s.module_tracer);
  s.strategy->set_tracer(s.tracer.get());
}

void write_rank_trace(Trainer::State& s) noexcept {
  if (!s.tracer) return;
  try {
    s.tracer->write(rank_file(s, s.world->rank));
  } catch (const std::exception& e) {
    log::warn("trace", "rank ", s.world->rank, ": no trace file: ", e.what());
  }
}

void merge_run_trace(Trainer::State& s) noexcept {
  if (!s.tracer || !s.world->is_chief()) return;
  std::vector<std::string> files;
  for (int r = 0; r < s.world->size; ++r) files.push_back(rank_file(s, r));
  std::string out = (fs::path(s.run_dir) / "trace.json").string();
  try {
    int merged = metrics::merge_traces(files, out);
    std::printf("cohort train: trace of %d of %d rank(s) in %s (open in ui.perfetto.dev)\n", merged,
                s.world->size, out.c_str());
  } catch (const std::exception& e) {
    log::warn("trace", "cannot merge the trace into ", out, ": ", e.what());
  }
}

}  // namespace cohort::train
