#pragma once
// Which directory a run writes, chosen so that a new run never touches an earlier run's files.
//
// - A fresh run (no run.resume, not a launcher's restart) writes <run.dir>/<run.name> when that
//   is absent or empty. When it holds anything (an earlier run's metrics.jsonl, checkpoints,
//   config.toml...), the run goes to the first free <run.name>.<N>, N = 2, 3, ... (as
//   Lightning's version_N), and says so; the earlier directories are not touched.
// - A run that continues one (run.resume set, or a worker restarted by the launcher) writes
//   into the newest directory of the name: the highest-numbered <run.name>.<N> that exists, else
//   <run.name>; it appends to its metrics.
//
// Every process of a job must write the same directory. `cohort train --workers` chooses once,
// before it starts any worker, and hands the choice to every worker and every restart in
// COHORT_RUN_DIR; workers started by another launcher (torchrun, mpirun, `cohort run`) take
// rank 0's choice (agree_on_run_dir).
#include <string>

#include "cohort/core/config.h"
#include "cohort/rendezvous/bootstrap.h"
#include "cohort/train/world.h"

namespace cohort::train {

// The variable a launcher sets to the run directory it chose for every worker.
inline constexpr const char* kRunDirVariable = "COHORT_RUN_DIR";
// The store key under which rank 0 publishes its choice when no launcher made one: the other
// ranks and the parameter servers (which are not ranks) read it there.
inline constexpr const char* kRunDirStoreKey = "train/run_dir";

enum class RunStart { kFresh, kContinue };

struct RunDir {
  std::string path;  // where this run writes (created)
  std::string base;  // <run.dir>/<run.name>
  RunStart start = RunStart::kFresh;
  // A fresh run that found <run.dir>/<run.name> taken and writes a numbered directory: worth
  // a line (numbered_run_notice). A continued run in a numbered directory is not news.
  bool avoided_earlier() const { return start == RunStart::kFresh && path != base; }
};

// Chooses (and creates) the directory as above. A fresh run claims a numbered directory with
// mkdir, so two runs started at the same moment never share one. IoError naming the directory
// when it cannot be created.
RunDir choose_run_dir(const std::string& parent, const std::string& name, RunStart start);

// kContinue when run.resume is set or `restarts` (attempts or worker restarts before this one)
// is above 0.
RunStart run_start(const Config& cfg, int restarts);

// The line saying where a numbered run writes and why.
std::string numbered_run_notice(const RunDir& d);

// Points run.dir and run.name at `dir`, so that every <run.dir>/<run.name> in the process (the
// trainer's, a parameter server's) is that directory, and config.toml records its real name.
void set_run_dir(Config& cfg, const std::string& dir);

// Rank 0's `chosen` on every rank: through the job's store (published there even in a job of
// one worker, for its parameter servers), or a broadcast on the group under comm.backend =
// "mpi". Collective when the job has more than one process.
std::string agree_on_run_dir(const TrainWorld& world, const std::string& chosen, double timeout_s);

}  // namespace cohort::train
