// calibrate_cost_model(): measured once and cached per (world size, transports, hosts), with
// ranks as threads. Measurements are shortened (MeasureOptions) to keep the tests fast.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/comm/collective_util.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;
using transport::TransportKind;

class CostModelCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cohort_cost_model_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    path_ = (dir_ / "sub" / "cost_model.json").string();  // parent directories are created
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  CalibrationOptions options(bool force = false) const {
    return {.cache_path = path_,
            .force_measure = force,
            .measure = {.latency_iters = 10, .bandwidth_bytes = 64 << 10, .bandwidth_iters = 2}};
  }

  // Calibrates on `size` ranks-as-threads; returns every rank's model and info.
  struct Run {
    std::vector<CostModel> models;
    std::vector<CostModel> installed;  // comm.cost_model() afterwards
    std::vector<CalibrationInfo> infos;
  };
  Run calibrate(int size, const CalibrationOptions& o) const {
    Run run{std::vector<CostModel>(size_t(size)), std::vector<CostModel>(size_t(size)),
            std::vector<CalibrationInfo>(size_t(size))};
    with_comms(size, test_options(TransportKind::kShm), [&](Communicator& c) {
      size_t r = size_t(c.rank());
      run.models[r] = calibrate_cost_model(c, o, &run.infos[r]);
      run.installed[r] = c.cost_model();
    });
    return run;
  }

  nlohmann::json file() const {
    std::ifstream in(path_);
    return nlohmann::json::parse(in);
  }

  std::filesystem::path dir_;
  std::string path_;
};

void expect_same_model(const CostModel& a, const CostModel& b, const std::string& what) {
  EXPECT_EQ(a.alpha_us, b.alpha_us) << what;
  EXPECT_EQ(a.beta_us_per_byte, b.beta_us_per_byte) << what;
  EXPECT_EQ(a.gamma_us_per_byte, b.gamma_us_per_byte) << what;
}

// Every rank returned and installed rank 0's model, and agrees on measured/key.
void expect_agreement(const auto& run) {
  for (size_t r = 0; r < run.models.size(); ++r) {
    std::string rank = "rank " + std::to_string(r);
    expect_same_model(run.models[r], run.models[0], rank);
    expect_same_model(run.installed[r], run.models[0], rank + " installed");
    EXPECT_EQ(run.infos[r].measured, run.infos[0].measured) << rank;
    EXPECT_EQ(run.infos[r].key, run.infos[0].key) << rank;
  }
}

TEST_F(CostModelCache, FirstCallMeasuresAndWritesSecondLoadsWithoutMeasuring) {
  Run first = calibrate(2, options());
  expect_agreement(first);
  EXPECT_TRUE(first.infos[0].measured);
  EXPECT_EQ(first.infos[0].warning, "");
  EXPECT_EQ(first.infos[0].key.rfind("n=2 transports=shm:2 hosts=", 0), 0u) << first.infos[0].key;
  ASSERT_TRUE(std::filesystem::exists(path_));
  nlohmann::json doc = file();
  EXPECT_EQ(doc["version"], 1);
  ASSERT_EQ(doc["entries"].size(), 1u) << doc.dump();
  EXPECT_EQ(doc["entries"][first.infos[0].key]["alpha_us"].get<double>(), first.models[0].alpha_us);
  // No temporary file left beside it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_ / "sub"), {}), 1);

  Run second = calibrate(2, options());
  expect_agreement(second);
  EXPECT_FALSE(second.infos[0].measured);
  expect_same_model(second.models[0], first.models[0], "loaded from the cache");

  // comm.calibrate = "always": measures even though the entry exists.
  Run forced = calibrate(2, options(/*force=*/true));
  expect_agreement(forced);
  EXPECT_TRUE(forced.infos[0].measured);
}

TEST_F(CostModelCache, CorruptFileIsIgnoredWithAWarningNamingItAndRewritten) {
  std::filesystem::create_directories(dir_ / "sub");
  std::ofstream(path_) << "{\"version\": 1, \"entries\": {";  // truncated
  Run run = calibrate(2, options());
  expect_agreement(run);
  EXPECT_TRUE(run.infos[0].measured);
  EXPECT_NE(run.infos[0].warning.find("cost model cache " + path_ + " ignored"), std::string::npos)
      << run.infos[0].warning;
  EXPECT_NE(run.infos[0].warning.find("not valid JSON"), std::string::npos) << run.infos[0].warning;
  EXPECT_EQ(run.infos[1].warning, "");  // only rank 0 reads the file
  EXPECT_FALSE(calibrate(2, options()).infos[0].measured) << "rewritten after measuring";
}

TEST_F(CostModelCache, EntryWithNonPositiveFiguresIsIgnoredWithAWarning) {
  Run first = calibrate(2, options());
  nlohmann::json doc = file();
  doc["entries"][first.infos[0].key]["beta_us_per_byte"] = -1.0;
  std::ofstream(path_) << doc.dump();
  Run run = calibrate(2, options());
  EXPECT_TRUE(run.infos[0].measured);
  EXPECT_NE(run.infos[0].warning.find("needs positive alpha_us, beta_us_per_byte"),
            std::string::npos)
      << run.infos[0].warning;
  EXPECT_GT(run.models[0].beta_us_per_byte, 0);
}

TEST_F(CostModelCache, DifferentWorldSizeGetsItsOwnEntry) {
  Run two = calibrate(2, options());
  Run three = calibrate(3, options());
  expect_agreement(three);
  EXPECT_TRUE(three.infos[0].measured) << "a 2-rank entry must not serve 3 ranks";
  EXPECT_EQ(three.infos[0].key.rfind("n=3 transports=shm:6 hosts=", 0), 0u) << three.infos[0].key;
  EXPECT_EQ(file()["entries"].size(), 2u) << file().dump();
  Run two_again = calibrate(2, options());
  EXPECT_FALSE(two_again.infos[0].measured);
  expect_same_model(two_again.models[0], two.models[0], "the 2-rank entry survived");
  Run three_again = calibrate(3, options());
  EXPECT_FALSE(three_again.infos[0].measured);
  expect_same_model(three_again.models[0], three.models[0], "the 3-rank entry");
}

TEST_F(CostModelCache, EmptyPathMeasuresAndWritesNothing) {
  CalibrationOptions o = options();
  o.cache_path = "";
  Run run = calibrate(2, o);
  expect_agreement(run);
  EXPECT_TRUE(run.infos[0].measured);
  EXPECT_FALSE(std::filesystem::exists(dir_));
}

TEST(CostModelCacheDefault, LivesUnderHomeDotCache) {
  EXPECT_EQ(default_cost_model_cache("/home/ann"), "/home/ann/.cache/cohort/cost_model.json");
}

}  // namespace
}  // namespace cohort::comm
