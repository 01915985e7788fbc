// The flight recorder's verdict (launch/flight_verdict.h) over hand-made records: a rank that
// wrote nothing is behind, else the ranks with the lowest completed collective, else nobody;
// and the files are read from a directory (a torn one counts as none).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cohort/launch/flight_verdict.h"

namespace cohort::launch {
namespace {

using nlohmann::json;

// A rank's record: collectives 0..completed done, then `stuck_op` #completed+1 in `state`.
json record(int rank, int64_t completed, const std::string& stuck_op = "allreduce",
            const std::string& state = "failed") {
  json entries = json::array();
  for (int64_t s = std::max<int64_t>(0, completed - 2); s <= completed; ++s)
    entries.push_back({{"seq", s}, {"op", "allreduce"}, {"state", "completed"}, {"count", 4}});
  entries.push_back({{"seq", completed + 1},
                     {"op", stuck_op},
                     {"dtype", "f32"},
                     {"count", 1009},
                     {"algorithm", "ring"},
                     {"state", state}});
  return {{"rank", rank},
          {"last_completed_seq", completed},
          {"reason", "timed out after 5000 ms"},
          {"entries", entries}};
}

TEST(FlightVerdict, ARankWithoutARecordIsBehind) {
  FlightVerdict v = analyse_flight_records({0, 1}, {record(0, 56), json()});
  EXPECT_EQ(v.behind, std::vector<int>{1});
  EXPECT_NE(v.summary.find("rank 1 is behind: wrote no record (stopped, hung or killed) while "
                           "rank 0 failed waiting in allreduce #57 (f32 x 1009, ring, failed)"),
            std::string::npos)
      << v.summary;
  std::string text = v.format("/tmp/x");
  EXPECT_NE(text.find("flight recorder: 1 of 2 ranks wrote a record (/tmp/x)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 1 wrote no record: stopped, hung or killed"), std::string::npos);
  EXPECT_NE(text.find("rank 0: last completed collective #56; in allreduce #57"), std::string::npos)
      << text;
  EXPECT_NE(text.find("verdict: rank 1 is behind"), std::string::npos);
}

TEST(FlightVerdict, TheRanksWithTheLowestCompletedCollectiveAreBehind) {
  FlightVerdict v =
      analyse_flight_records({0, 1, 2, 3}, {record(0, 57), record(1, 55, "broadcast", "started"),
                                            record(2, 57), record(3, 55, "broadcast", "issued")});
  EXPECT_EQ(v.behind, (std::vector<int>{1, 3}));
  EXPECT_NE(v.summary.find("ranks 1, 3 are behind: last completed collective #55 while others "
                           "reached #57; stuck in broadcast #56"),
            std::string::npos)
      << v.summary;
}

TEST(FlightVerdict, EveryRankAtTheSameCallNamesNobody) {
  FlightVerdict v = analyse_flight_records({0, 1}, {record(0, 9), record(1, 9)});
  EXPECT_TRUE(v.behind.empty());
  EXPECT_NE(v.summary.find("no rank is behind: every rank stopped at allreduce #10"),
            std::string::npos)
      << v.summary;
}

TEST(FlightVerdict, NoRecordsAtAll) {
  FlightVerdict v = analyse_flight_records({0, 1}, {json(), json()});
  EXPECT_FALSE(v.any_record());
  EXPECT_TRUE(v.behind.empty());
}

TEST(FlightVerdict, ReadsRankFilesAndTreatsATornOneAsMissing) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("cohort_verdict_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "rank0.json") << record(0, 3).dump();
  std::ofstream(dir / "rank2.json") << "{\"rank\": 2, \"entr";  // torn
  FlightVerdict v = read_flight_records(dir.string(), {0, 1, 2});
  ASSERT_EQ(v.ranks.size(), 3u);
  EXPECT_TRUE(v.ranks[0].wrote);
  EXPECT_FALSE(v.ranks[1].wrote);
  EXPECT_FALSE(v.ranks[2].wrote);
  EXPECT_EQ(v.behind, (std::vector<int>{1, 2}));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cohort::launch
