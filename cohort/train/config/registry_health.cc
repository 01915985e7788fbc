// Declarations of the keys that make a run's health visible or break it on purpose: fault
// injection (fault.*: the seams of DESIGN convention 9, so that the straggler and hang checks
// run from a config), straggler detection (metrics.straggler_*, train/straggler.h) and the
// communicator's flight recorder (comm.flight_recorder_size, comm/flight_recorder.h). Part of
// the registry behind docs/config.md.
#include "cohort/train/config/train_config.h"

namespace cohort::train {
namespace {

using T = ConfigType;

// A rank number, -1 meaning none.
ConfigKey rank_key(const char* name, const std::string& doc) {
  return {name, T::kInt, int64_t(-1), doc, "", {}, -1.0};
}

// A count or step, >= 0.
ConfigKey count_key(const char* name, int64_t value, const std::string& doc) {
  return {name, T::kInt, value, doc, "", {}, 0.0};
}

// Seams the trainer acts on: a slow, a killed and a stopped rank.
void add_process_fault_keys(ConfigRegistry& r) {
  r.add(rank_key("fault.slow_rank",
                 "Fault injection (stragglers): the rank whose steps take fault.slow_factor "
                 "times as long: after each step it sleeps (factor - 1) times the step's time "
                 "(batch, forward, backward, optimizer, communication). -1: none."));
  r.add({"fault.slow_factor",
         T::kFloat,
         1.0,
         "Fault injection: how many times slower fault.slow_rank computes (>= 1).",
         "",
         {},
         1.0});
  r.add({"fault.slow_rotate", T::kBool, false,
         "Fault injection: the slowed rank moves on every step, (fault.slow_rank + step) mod "
         "the number of workers, so each worker is slow one step in N (a transient straggler "
         "rather than one slow machine); its sleep is (fault.slow_factor - 1) times the step "
         "without the communication it waited for."});
  r.add(rank_key("fault.kill_rank",
                 "Fault injection (tests): the rank that kills itself with SIGKILL; -1: none."));
  r.add(count_key("fault.kill_at_step", 0,
                  "Fault injection: fault.kill_rank dies right after this step, on the first "
                  "attempt only (a restarted job runs on)."));
  r.add(rank_key("fault.stop_rank",
                 "Fault injection (hangs): the rank that stops itself with SIGSTOP, as a process "
                 "frozen by a debugger or a dead disk would; its peers' next collective times "
                 "out after comm.timeout_s and the launcher prints the flight recorder's "
                 "verdict. -1: none."));
  r.add(count_key("fault.stop_at_step", 0,
                  "Fault injection: fault.stop_rank stops right after this step, on the first "
                  "attempt only."));
}

// Seams of the transport (comm/transport/transport.h, FaultInjection): they act on the
// messages a rank sends.
void add_transport_fault_keys(ConfigRegistry& r) {
  r.add({"fault.delay_ms",
         T::kFloat,
         0.0,
         "Fault injection (latency): every message fault.delay_rank sends waits this many "
         "milliseconds before it is posted. 0: none.",
         "",
         {},
         0.0});
  r.add(rank_key("fault.delay_rank",
                 "Fault injection: the rank fault.delay_ms applies to; -1: "
                 "every rank."));
  r.add(rank_key("fault.stall_rank",
                 "Fault injection (a frozen rank): this rank sleeps fault.stall_s once, just "
                 "before sending its first message of collective number fault.stall_at_seq or "
                 "later (the communicator's sequence number). -1: none."));
  r.add(count_key("fault.stall_at_seq", 0,
                  "Fault injection: the collective fault.stall_rank stalls before."));
  r.add({"fault.stall_s",
         T::kFloat,
         5.0,
         "Fault injection: how long fault.stall_rank stalls, in seconds.",
         "",
         {},
         0.0});
  r.add(rank_key("fault.drop_rank",
                 "Fault injection (a link going down): this rank breaks its connection to "
                 "fault.drop_peer instead of sending its message number fault.drop_after to it; "
                 "both sides' operations then fail with an error naming the other. -1: none."));
  r.add(rank_key("fault.drop_peer", "Fault injection: the peer fault.drop_rank cuts off."));
  r.add(count_key("fault.drop_after", 0,
                  "Fault injection: how many messages fault.drop_rank sends to fault.drop_peer "
                  "before it drops the connection."));
}

void add_straggler_keys(ConfigRegistry& r) {
  r.add(count_key("metrics.straggler_every", 10,
                  "Straggler detection: every N steps the ranks exchange their median compute "
                  "time per step over those steps (one small allgather; not for "
                  "parallel.strategy = 'ps', whose workers must not wait for each other). 0: "
                  "off."));
  r.add({"metrics.straggler_factor",
         T::kFloat,
         1.5,
         "Straggler detection: a rank whose median step is this many times the median of the "
         "others' is slow for that interval.",
         "",
         {},
         1.0});
  r.add({"metrics.straggler_patience",
         T::kInt,
         int64_t(2),
         "Straggler detection: a rank slow for this many consecutive intervals is named (log "
         "line on rank 0, `straggler` in the step record and the summary).",
         "",
         {},
         1.0});
  r.add(count_key("comm.flight_recorder_size", 64,
                  "The communicator's flight recorder: how many of its last collectives and "
                  "point-to-point calls it keeps, to write when one fails or times out "
                  "(docs/monitoring.md). 0: none."));
  r.add({"elastic.detect_s",
         T::kFloat,
         2.0,
         "Liveness: every worker beats into the job's store; a worker whose beat has not moved "
         "for this many seconds (it died, was stopped, or was cut off) is named on every other "
         "worker, and their collectives in flight fail at once naming it instead of waiting for "
         "comm.timeout_s (docs/elastic.md). 0: off.",
         "COHORT_ELASTIC_DETECT_S",
         {},
         0.0});
  r.add({"elastic.min_workers",
         T::kInt,
         int64_t(0),
         "In-place recovery (docs/elastic.md): when a worker is lost (rank 0 too: the lowest "
         "member takes over), the others agree on the new membership and go on from the last "
         "completed step with the "
         "state in memory, while at least this many remain (and at least half). 0: a lost "
         "worker stops the job (then --max-restarts restarts it from a checkpoint). "
         "parallel.strategy = `ddp`, `zero`, `local_sgd` or `gossip`; train.grad_accum_steps "
         "= 1. `cohort run --nnodes MIN:MAX` sets it to MIN x the workers per node.",
         "COHORT_ELASTIC_MIN_WORKERS",
         {},
         0.0});
  r.add({"elastic.fixed_batch", T::kBool, true,
         "With elastic.min_workers: the global batch stays data.batch_size x the launched "
         "workers whatever the membership; the workers left compute the slots of the lost ones "
         "(gradient accumulation), so the step count and the data of each step stay those of "
         "a run without failures. false: each worker keeps its batch and the global batch "
         "shrinks with the workers (docs/elastic.md)."});
  r.add({"elastic.exact", T::kBool, false,
         "With elastic.min_workers and elastic.fixed_batch: each slot's gradient is kept apart "
         "and they are summed in slot order whoever computed them, so a run with failures and "
         "joins ends bit-identical to one without. Costs the overlap of communication with "
         "backward (docs/elastic.md). Models without dropout or batch norm."});
}

}  // namespace

void add_health_keys(ConfigRegistry& r) {
  add_process_fault_keys(r);
  add_transport_fault_keys(r);
  add_straggler_keys(r);
}

}  // namespace cohort::train
