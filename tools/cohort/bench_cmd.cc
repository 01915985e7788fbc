// `cohort bench collectives -n N --op allreduce --sizes 4K:64M ...`: forks N ranks on this
// host and prints an nccl-tests-style table (the sweep is in bench_collectives.cc).
#include <memory>

#include "tools/cohort/bench_collectives.h"
#include "tools/cohort/commands.h"

namespace cohort::cli {

void add_bench_command(CLI::App& app, Handlers& h) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  CLI::App* cmd = bench->add_subcommand(
      "collectives", "Time a collective over message sizes on N local ranks (nccl-tests table)");
  auto o = std::make_shared<BenchCollectivesOptions>();
  cmd->add_option("-n,--ranks", o->ranks, "Number of ranks (processes) to fork")
      ->capture_default_str();
  cmd->add_option("--op", o->op, "allreduce, broadcast, allgather or reduce_scatter")
      ->capture_default_str();
  cmd->add_option("--sizes", o->sizes, "MIN:MAX bytes, doubling (K, M, G suffixes)")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "f32, f64, f16, bf16, i32, i64 or u8")
      ->capture_default_str();
  cmd->add_option("--transport", o->transport, "shm, tcp or auto")->capture_default_str();
  cmd->add_option(
         "--algo", o->algo,
         "auto, ring, recursive_doubling, halving_doubling, hierarchical (allreduce), tree "
         "(broadcast)")
      ->capture_default_str();
  cmd->add_option("--iters", o->iters, "Timed iterations per size")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed iterations per size")->capture_default_str();
  cmd->add_option("--backend", o->backend,
                  "native (fork the ranks) or mpi (Open MPI, under mpirun; re-runs itself under "
                  "mpirun if needed)")
      ->capture_default_str();
  cmd->add_option("--single-copy", o->single_copy,
                  "Shared-memory messages of at least this size are read straight from the "
                  "sender's memory (process_vm_readv); off: always through the rings")
      ->capture_default_str();
  cmd->add_option("--buffers", o->buffers,
                  "shared: buffers from the communicator's shared arena, read in place by "
                  "peers (as after Communicator::alloc_shared); heap: ordinary memory")
      ->capture_default_str();
  cmd->add_option("--bind", o->bind,
                  "core: pin rank r to the r-th CPU when every rank can have one (as mpirun); "
                  "none: leave placement to the scheduler")
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "Deadline of each collective, seconds")
      ->capture_default_str();
  cmd->callback([&h, o] { h.run = [o] { return run_bench_collectives(*o); }; });
}

}  // namespace cohort::cli
