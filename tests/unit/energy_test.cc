// The energy meter (cohort/metrics/energy.h): RAPL on a fake sysfs tree, the CPU power model
// on known clock readings, and the energy.* keys' errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "cohort/core/error.h"
#include "cohort/metrics/energy.h"
#include "cohort/train/config/train_config.h"
#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace cohort::metrics {
namespace {

namespace fs = std::filesystem;
using cohort::testing::TempDir;
using cohort::testing::write_bytes;
using Error = InvalidArgument;
using cohort::testing::error_of;

// One powercap domain: <root>/<name>/{energy_uj,max_energy_range_uj}.
void domain(const fs::path& root, const std::string& name, unsigned long long uj,
            unsigned long long range = 262143328850ULL) {
  fs::create_directories(root / name);
  write_bytes(root / name / "energy_uj", std::to_string(uj) + "\n");
  write_bytes(root / name / "max_energy_range_uj", std::to_string(range) + "\n");
}

TEST(Rapl, SumsPackagesSkipsSubDomainsAndHandlesWrapAround) {
  TempDir dir;
  fs::path root = dir.path();
  const unsigned long long range = 1000000000ULL;  // 1000 J
  domain(root, "intel-rapl:0", 5000000, range);
  domain(root, "intel-rapl:1", range - 1000000, range);  // 1 J before it wraps
  domain(root, "intel-rapl:0:0", 7000000, range);        // cores of package 0: inside it
  domain(root, "intel-rapl-mmio:0", 9000000, range);     // a second view of package 0
  fs::create_directories(root / "intel-rapl");           // the control type, no counter
  std::unique_ptr<RaplReader> r = RaplReader::open(root.string(), 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->packages(), 2u);
  EXPECT_STREQ(r->source(), "rapl");
  domain(root, "intel-rapl:0", 17500000, range);  // +12.5 J
  domain(root, "intel-rapl:1", 2000000, range);   // wrapped: 1 J + 2 J
  domain(root, "intel-rapl:0:0", 99000000, range);
  domain(root, "intel-rapl-mmio:0", 99000000, range);
  EXPECT_DOUBLE_EQ(r->joules(), 15.5);
  EXPECT_DOUBLE_EQ(r->joules(), 0.0);  // nothing since
  domain(root, "intel-rapl:0", 21500000, range);
  EXPECT_DOUBLE_EQ(r->joules(), 4.0);
}

TEST(Rapl, RanksOnOneHostSplitThePackagesEvenly) {
  TempDir dir;
  domain(dir.path(), "intel-rapl:0", 0);
  std::unique_ptr<RaplReader> r = RaplReader::open(dir.path(), 2);
  ASSERT_NE(r, nullptr);
  domain(dir.path(), "intel-rapl:0", 10000000);
  EXPECT_DOUBLE_EQ(r->joules(), 5.0);
}

TEST(Rapl, NoReadablePackageIsNoReader) {
  TempDir dir;
  EXPECT_EQ(RaplReader::open(dir.path(), 1), nullptr);
  EXPECT_EQ(RaplReader::open((fs::path(dir.path()) / "absent").string(), 1), nullptr);
  domain(dir.path(), "intel-rapl:0:1", 5);  // a sub-domain alone is not a package
  EXPECT_EQ(RaplReader::open(dir.path(), 1), nullptr);
}

TEST(CpuModel, FormulaOnKnownTimes) {
  PowerModelParams p{.active_watts_per_core = 10, .idle_watts_per_core = 2, .cores = 4};
  // 1 s of wall on 4 cores = 4 core-seconds; 1.5 busy -> 1.5*10 + 2.5*2.
  EXPECT_DOUBLE_EQ(CpuPowerModel::joules(p, 1.5, 1.0), 20.0);
  // More CPU than the cores' wall time (helper threads): no negative idle time.
  EXPECT_DOUBLE_EQ(CpuPowerModel::joules(p, 5.0, 1.0), 50.0);
  EXPECT_DOUBLE_EQ(CpuPowerModel::joules(p, 0.0, 0.5), 4.0);
}

TEST(CpuModel, ReaderTakesIntervalsOfItsClocks) {
  CpuClocks now{100.0, 7.0};
  CpuPowerModel m({.active_watts_per_core = 10, .idle_watts_per_core = 2, .cores = 2},
                  [&] { return now; });
  EXPECT_STREQ(m.source(), "model");
  now = {102.0, 10.0};  // 2 s wall on 2 cores, 3 s CPU: 30 + 1*2
  EXPECT_DOUBLE_EQ(m.joules(), 32.0);
  now = {103.0, 10.0};  // 1 s idle on both cores
  EXPECT_DOUBLE_EQ(m.joules(), 4.0);
}

TEST(EnergyConfig, ChoosesTheSourceAndNamesTheKeyOnErrors) {
  TempDir dir;
  EnergyOptions o;
  o.rapl_root = dir.path();
  o.source = "auto";  // no RAPL here: the model
  EXPECT_STREQ(make_energy_reader(o)->source(), "model");
  o.source = "off";
  EXPECT_EQ(make_energy_reader(o), nullptr);
  o.source = "rapl";
  std::string msg = error_of<Error>([&] { make_energy_reader(o); });
  EXPECT_NE(msg.find("energy.source"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.path()), std::string::npos) << msg;
  domain(dir.path(), "intel-rapl:0", 1);
  EXPECT_STREQ(make_energy_reader(o)->source(), "rapl");
  o.source = "auto";
  EXPECT_STREQ(make_energy_reader(o)->source(), "rapl");
  o.source = "solar";
  EXPECT_NE(error_of<Error>([&] { make_energy_reader(o); }).find("energy.source"),
            std::string::npos);
}

TEST(EnergyConfig, RegistryRejectsNegativeWattsAndUnknownSources) {
  for (const char* bad : {"energy.active_watts_per_core=-1", "energy.idle_watts_per_core=-0.5",
                          "energy.source=solar", "metrics.target_accuracy=1.5"}) {
    std::string msg = error_of<Error>([&] { train::load_config("", {bad}); });
    std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_NE(msg.find(key), std::string::npos) << bad << ": " << msg;
  }
  Config c = train::load_config("", {});
  EXPECT_EQ(c.get_string("energy.source"), "auto");
  EXPECT_EQ(c.get_string("energy.rapl_root"), "/sys/class/powercap");
  EXPECT_DOUBLE_EQ(c.get_float("metrics.target_accuracy"), 0.0);
}

}  // namespace
}  // namespace cohort::metrics
