// `cohort bench collectives --backend mpi`: the sweep of bench_sweep_impl.h over an
// MpiCommunicator. Built only when cohort_comm_mpi exists (tools/cohort/CMakeLists.txt), so this
// is the one file of the command that depends on MPI. Blocking collectives, as the backend's
// author recommends for timing: Open MPI then uses its tuned algorithms (mpi_backend.h); a dead
// peer is left to mpirun, which kills the job.
#include "cohort/comm/backends/mpi/mpi_backend.h"  // before the impl: its comm:: calls see these
#include "tools/cohort/bench_sweep_impl.h"

namespace cohort::cli {

int run_bench_mpi_rank(BenchPlan plan) {
  comm::MpiOptions mo;
  mo.blocking_collectives = true;
  mo.timeout = plan.timeout;
  auto c = comm::MpiCommunicator::create(mo);
  plan.ranks = c->size();  // the job's size, whatever -n said
  // MPI chooses the algorithm itself (Algorithm must be kAuto).
  auto algo_name = [](size_t) { return "mpi"; };
  return sweep_detail::run_sweep(plan, *c, "mpi", algo_name);
}

}  // namespace cohort::cli
