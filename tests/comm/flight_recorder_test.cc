// The communicator's flight recorder (comm/flight_recorder.h): the ring keeps the last N calls
// with their states, and a rank whose collective times out writes it to the dump path, names
// the file in its error, and records the call it was stuck in.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/comm/collective_util.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;
using std::chrono::milliseconds;

FlightEntry collective(uint64_t seq) {
  FlightEntry e;
  e.seq = seq;
  e.op = "allreduce";
  e.dtype = "f32";
  e.count = 4;
  e.bytes = 16;
  return e;
}

TEST(FlightRecorder, KeepsTheLastNCallsOldestFirstWithTheirStates) {
  FlightRecorder f(3);
  for (uint64_t s = 0; s < 5; ++s) {
    uint64_t id = f.issue(collective(s));
    f.start(id);
    if (s < 4) f.complete(id, int64_t(s));
  }
  f.complete(0, 0);  // overwritten long ago: its entry is gone, the sequence stays at 3
  auto entries = f.entries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].seq, 2u);
  EXPECT_EQ(entries[2].seq, 4u);
  EXPECT_EQ(entries[1].state, FlightState::kCompleted);
  EXPECT_EQ(entries[2].state, FlightState::kStarted);
  EXPECT_GT(entries[2].started_us, 0);
  EXPECT_EQ(entries[2].finished_us, 0);
  nlohmann::json j = f.dump_json(1, 2, "why");
  EXPECT_EQ(j["rank"], 1);
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["reason"], "why");
  EXPECT_EQ(j["last_issued_seq"], 4);
  EXPECT_EQ(j["last_completed_seq"], 3);
  EXPECT_EQ(j["entries"][2]["state"], "started");
  EXPECT_EQ(j["entries"][0]["op"], "allreduce");
}

TEST(FlightRecorder, PointToPointCallsDoNotMoveTheCollectiveSequence) {
  FlightRecorder f(4);
  f.complete(f.issue(collective(0)), 0);
  FlightEntry p;
  p.p2p = true;
  p.seq = 7;
  p.op = "send";
  p.peer = 1;
  uint64_t id = f.issue(p);
  f.fail(id, "peer gone");
  nlohmann::json j = f.dump_json(0, 2, "");
  EXPECT_EQ(j["last_issued_seq"], 0);
  EXPECT_EQ(j["last_completed_seq"], 0);
  EXPECT_EQ(j["entries"][1]["peer"], 1);
  EXPECT_EQ(j["entries"][1]["error"], "peer gone");
}

TEST(FlightRecorder, ZeroCapacityRecordsNothingButTheSequences) {
  FlightRecorder f(0);
  f.complete(f.issue(collective(0)), 0);
  EXPECT_TRUE(f.entries().empty());
  EXPECT_EQ(f.dump_json(0, 1, "")["last_issued_seq"], 0);
  EXPECT_EQ(f.dump_json(0, 1, "")["last_completed_seq"], 0);  // the verdict still works
}

// More ops in flight than the ring holds (many DDP buckets): the oldest completes after its
// slot was reused, and still counts, or the fastest rank would look behind.
TEST(FlightRecorder, AnOpCompletedAfterItsSlotWasReusedStillCounts) {
  FlightRecorder f(2);
  std::vector<uint64_t> ids;
  for (uint64_t s = 0; s < 4; ++s) ids.push_back(f.issue(collective(s)));
  f.complete(ids[0], 0);
  f.complete(ids[1], 1);
  EXPECT_EQ(f.dump_json(0, 2, "")["last_completed_seq"], 1);
  EXPECT_EQ(f.entries()[0].state, FlightState::kIssued);  // seq 2: not completed yet
}

// Rank 1 never calls the second allreduce (a hung rank): rank 0 times out, writes its ring to
// the dump path (atomically: no temporary file left) and names it in the error.
TEST(FlightRecorder, TimedOutRankWritesItsRingAndSaysWhere) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("cohort_flight_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto store = std::make_shared<rendezvous::HashStore>();
  run_ranks(2, [&](int r) {
    CommOptions o = test_options(transport::TransportKind::kAuto);
    o.timeout = milliseconds(300);
    o.flight_dump_path = (dir / ("rank" + std::to_string(r) + ".json")).string();
    auto c = Communicator::create(store, r, 2, o);
    std::vector<float> buf(1009, 1.0f);
    allreduce(*c, {.output = buf.data(), .count = buf.size()});
    if (r == 1) {  // hangs (keeping its connections) past rank 0's deadline
      std::this_thread::sleep_for(milliseconds(900));
      return;
    }
    std::string msg =
        error_of<Timeout>([&] { allreduce(*c, {.output = buf.data(), .count = buf.size()}); });
    EXPECT_NE(msg.find("rank 0 wrote its flight record to " + o.flight_dump_path),
              std::string::npos)
        << msg;
  });
  EXPECT_FALSE(fs::exists(dir / "rank1.json"));
  EXPECT_FALSE(fs::exists(dir / "rank0.json.tmp"));
  std::ifstream in(dir / "rank0.json");
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["rank"], 0);
  EXPECT_NE(j["reason"].get<std::string>().find("timed out"), std::string::npos) << j.dump();
  const nlohmann::json& last = j["entries"].back();
  EXPECT_EQ(last["op"], "allreduce");
  EXPECT_EQ(last["state"], "failed");
  EXPECT_EQ(last["count"], 1009);
  EXPECT_EQ(last["bytes"], 1009 * 4);
  EXPECT_EQ(last["seq"].get<int64_t>(), j["last_completed_seq"].get<int64_t>() + 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cohort::comm
