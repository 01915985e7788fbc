#include "cohort/metrics/energy.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>

#include "cohort/core/error.h"

namespace cohort::metrics {
namespace {

namespace fs = std::filesystem;

// A sysfs counter: one unsigned decimal. nullopt when unreadable (permissions, gone).
std::optional<unsigned long long> read_counter(const fs::path& file) {
  std::ifstream in(file);
  unsigned long long v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

// Package domains only: "intel-rapl:0", not the sub-domain "intel-rapl:0:0", nor the
// control type "intel-rapl" itself, nor "intel-rapl-mmio:0" (a second view of a package).
bool is_package_domain(const std::string& name) {
  static const std::regex package("intel-rapl:[0-9]+");
  return std::regex_match(name, package);
}

}  // namespace

RaplReader::RaplReader(std::vector<Domain> domains, int ranks_per_host)
    : domains_(std::move(domains)), ranks_per_host_(std::max(ranks_per_host, 1)) {}

std::unique_ptr<RaplReader> RaplReader::open(const std::string& root, int ranks_per_host) {
  std::error_code ec;
  std::vector<Domain> found;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    if (!is_package_domain(e.path().filename().string())) continue;
    std::optional<unsigned long long> now = read_counter(e.path() / "energy_uj");
    std::optional<unsigned long long> range = read_counter(e.path() / "max_energy_range_uj");
    if (!now || !range || *range == 0) continue;
    found.push_back({(e.path() / "energy_uj").string(), *range, *now});
  }
  if (found.empty()) return nullptr;
  // Directory order is unspecified; a fixed order keeps readings reproducible.
  std::sort(found.begin(), found.end(),
            [](const Domain& a, const Domain& b) { return a.energy_file < b.energy_file; });
  return std::unique_ptr<RaplReader>(new RaplReader(std::move(found), ranks_per_host));
}

double RaplReader::joules() {
  unsigned long long total_uj = 0;
  for (Domain& d : domains_) {
    std::optional<unsigned long long> now = read_counter(d.energy_file);
    if (!now) continue;  // a transient read failure: this interval misses that package
    // The counter wraps at max_range_uj; at most one wrap fits in a step (hours at full power).
    total_uj += *now >= d.last_uj ? *now - d.last_uj : d.max_range_uj - d.last_uj + *now;
    d.last_uj = *now;
  }
  return double(total_uj) * 1e-6 / double(ranks_per_host_);
}

CpuClocks read_cpu_clocks() {
  timespec cpu{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  auto wall = std::chrono::steady_clock::now().time_since_epoch();
  return {std::chrono::duration<double>(wall).count(), double(cpu.tv_sec) + 1e-9 * cpu.tv_nsec};
}

CpuPowerModel::CpuPowerModel(PowerModelParams params, ClockFn clocks)
    : params_(params), clocks_(std::move(clocks)), last_(clocks_()) {}

double CpuPowerModel::joules(const PowerModelParams& p, double cpu_s, double wall_s) {
  double idle_core_s = std::max(0.0, wall_s * p.cores - cpu_s);
  return cpu_s * p.active_watts_per_core + idle_core_s * p.idle_watts_per_core;
}

double CpuPowerModel::joules() {
  CpuClocks now = clocks_();
  double j = joules(params_, now.cpu_s - last_.cpu_s, now.wall_s - last_.wall_s);
  last_ = now;
  return j;
}

std::unique_ptr<EnergyReader> make_energy_reader(const EnergyOptions& o) {
  if (o.source == "off") return nullptr;
  if (o.source == "model") return std::make_unique<CpuPowerModel>(o.model);
  COHORT_CHECK_ARG(o.source == "auto" || o.source == "rapl", "config: energy.source = '", o.source,
                   "' is not one of auto, rapl, model, off");
  std::unique_ptr<RaplReader> rapl = RaplReader::open(o.rapl_root, o.ranks_per_host);
  if (rapl) return rapl;
  COHORT_CHECK_ARG(o.source == "auto",
                   "config: energy.source = 'rapl' but no readable RAPL "
                   "package counter (intel-rapl:<N>/energy_uj) under energy.rapl_root = '",
                   o.rapl_root,
                   "' (missing, or readable by root only); use energy.source = "
                   "'auto' or 'model' for the CPU power model");
  return std::make_unique<CpuPowerModel>(o.model);
}

}  // namespace cohort::metrics
