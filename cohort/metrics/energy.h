#pragma once
// Energy of one rank: measured from RAPL counters where the host exposes them, otherwise
// estimated from a CPU power model. The trainer takes a reading at the end of each step and
// splits it between computing and waiting on communication (train/energy_account.h).
//
// RAPL (Intel, and AMD on recent kernels) publishes one cumulative counter per CPU package
// under /sys/class/powercap/intel-rapl:<N>/energy_uj, in microjoules, wrapping at
// max_energy_range_uj. Sub-domains (intel-rapl:<N>:<M>: cores, uncore, DRAM) are parts of
// their package, or outside it, and are skipped so that nothing is counted twice. Every rank
// on a host reads the same packages: a rank's share is the packages' energy divided by
// `ranks_per_host` (the ranks' CPU-time shares are not knowable without talking to the
// others at every step; an even split is the documented, simple choice).
//
// The model: a rank owns `cores` cores (its intra-op threads). Over an interval of wall time
// wall_s in which the process used cpu_s seconds of CPU (all its threads, clock
// CLOCK_PROCESS_CPUTIME_ID), its cores drew
//   cpu_s * active_watts_per_core + max(0, wall_s * cores - cpu_s) * idle_watts_per_core
// joules. An estimate: it knows neither the CPU's real power curve nor frequency scaling.
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cohort::metrics {

// A source of this rank's energy. One thread at a time.
class EnergyReader {
 public:
  virtual ~EnergyReader() = default;
  // "rapl" (measured) or "model" (estimated): the records' energy_source.
  virtual const char* source() const = 0;
  // Joules this rank used since the previous call (or since construction).
  virtual double joules() = 0;
};

class RaplReader final : public EnergyReader {
 public:
  // The package domains under `root` (e.g. /sys/class/powercap) whose energy_uj is readable;
  // null when there is none (no RAPL, or counters readable by root only, as on most kernels
  // since 2020). `ranks_per_host` >= 1 divides every reading.
  static std::unique_ptr<RaplReader> open(const std::string& root, int ranks_per_host);
  const char* source() const override { return "rapl"; }
  double joules() override;
  size_t packages() const { return domains_.size(); }

 private:
  struct Domain {
    std::string energy_file;
    unsigned long long max_range_uj = 0;  // the counter wraps here
    unsigned long long last_uj = 0;
  };
  RaplReader(std::vector<Domain> domains, int ranks_per_host);
  std::vector<Domain> domains_;
  int ranks_per_host_;
};

struct PowerModelParams {
  double active_watts_per_core = 0;  // a core running this rank's threads
  double idle_watts_per_core = 0;    // one of this rank's cores with nothing to run
  double cores = 1;                  // cores this rank owns (its intra-op threads)
};

// What the model needs of the clocks: wall time and this process's CPU time, in seconds.
struct CpuClocks {
  double wall_s = 0;
  double cpu_s = 0;
};
CpuClocks read_cpu_clocks();  // steady clock and CLOCK_PROCESS_CPUTIME_ID: two clock reads

class CpuPowerModel final : public EnergyReader {
 public:
  using ClockFn = std::function<CpuClocks()>;
  // `clocks` is read_cpu_clocks unless a test passes its own.
  explicit CpuPowerModel(PowerModelParams params, ClockFn clocks = read_cpu_clocks);
  const char* source() const override { return "model"; }
  double joules() override;
  // The formula above, for one interval.
  static double joules(const PowerModelParams& p, double cpu_s, double wall_s);

 private:
  PowerModelParams params_;
  ClockFn clocks_;
  CpuClocks last_;
};

// The energy.* keys, read by the trainer.
struct EnergyOptions {
  std::string source = "auto";  // "auto" (RAPL if readable, else the model), "rapl", "model", "off"
  std::string rapl_root = "/sys/class/powercap";
  int ranks_per_host = 1;
  PowerModelParams model;
};

// The reader energy.source asks for; null for "off". InvalidArgument naming energy.source
// (and the directory searched) when it is "rapl" and no package counter is readable, or when
// it is not one of the four values.
std::unique_ptr<EnergyReader> make_energy_reader(const EnergyOptions& o);

}  // namespace cohort::metrics
