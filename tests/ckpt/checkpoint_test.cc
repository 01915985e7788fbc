// CheckpointManager: retention, bit-exact resume, fallback past a corrupt checkpoint, leftovers
// from crashed runs, the async snapshot, and background errors.
#include "cohort/ckpt/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/ckpt/ckpt_test_util.h"
#include "tests/support/files.h"

namespace cohort::ckpt {
namespace {
namespace fs = std::filesystem;
using cohort::testing::read_bytes;
using cohort::testing::TempDir;
using cohort::testing::write_bytes;
using testing::patterned;
using testing::same_tensors;

CheckpointData make_data(int64_t step) {
  CheckpointData d;
  d.step = step;
  d.model = {{"fc1.weight", randn({8, 4}, uint64_t(step))},
             {"fc1.bias", patterned({8}, DType::bf16, uint8_t(step))},
             {"emb", patterned({3, 2}, DType::f16, uint8_t(step + 1))}};
  Tensor count = empty({}, DType::i64);
  *count.data<int64_t>() = step * 1000003;
  d.optimizer = {{"fc1.weight.exp_avg", randn({8, 4}, uint64_t(step + 100))},
                 {"step", count},
                 {"empty", empty({0}, DType::f64)}};
  d.state = {{"epoch", step / 2}, {"position", step * 64}, {"rng", {1, 2, step}}, {"lr", 0.05}};
  return d;
}

void expect_same(const CheckpointData& a, const CheckpointData& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_TRUE(same_tensors(a.model, b.model));
  EXPECT_TRUE(same_tensors(a.optimizer, b.optimizer));
  EXPECT_EQ(a.state, b.state);
}

std::string base(const std::string& path) {
  return fs::path(path).filename().string();
}

TEST(CheckpointManager, SaveFiveKeepThreeAndResumeBitExact) {
  TempDir tmp;
  CheckpointManager mgr({.dir = tmp.file("ckpt"), .keep = 3, .async = true});
  for (int64_t s = 1; s <= 5; ++s) mgr.save(make_data(s * 10));
  mgr.wait();
  auto dirs = mgr.list();
  ASSERT_EQ(dirs.size(), 3u);
  EXPECT_EQ(base(dirs[0]), "step-0000000030");
  EXPECT_EQ(base(dirs[1]), "step-0000000040");
  EXPECT_EQ(base(dirs[2]), "step-0000000050");
  auto latest = mgr.load_latest();
  ASSERT_TRUE(latest.has_value());
  expect_same(*latest, make_data(50));
  expect_same(CheckpointManager::load(dirs[0]), make_data(30));
}

TEST(CheckpointManager, KeepZeroKeepsAllAndEmptyDirLoadsNothing) {
  TempDir tmp;
  CheckpointManager mgr({.dir = tmp.file("ckpt"), .keep = 0, .async = false});
  EXPECT_FALSE(mgr.load_latest().has_value());
  for (int64_t s = 1; s <= 4; ++s) mgr.save(make_data(s));
  EXPECT_EQ(mgr.list().size(), 4u);
}

TEST(CheckpointManager, CorruptNewestFallsBackToPreviousAndWarns) {
  TempDir tmp;
  CheckpointManager mgr({.dir = tmp.file("ckpt"), .keep = 3, .async = false});
  for (int64_t s = 1; s <= 3; ++s) mgr.save(make_data(s));
  const std::string bad = mgr.list().back() + "/model.safetensors";
  std::string bytes = read_bytes(bad);
  bytes[bytes.size() - 5] ^= 0x01;  // one bit of tensor data: the safetensors still parses
  write_bytes(bad, bytes);
  ::testing::internal::CaptureStderr();
  auto latest = mgr.load_latest();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(latest.has_value());
  expect_same(*latest, make_data(2));
  EXPECT_NE(log.find("checksum mismatch in " + bad), std::string::npos) << log;
  try {
    CheckpointManager::load(mgr.list().back());
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

TEST(CheckpointManager, LeftoversFromCrashesAreIgnoredAndCleaned) {
  TempDir tmp;
  const std::string dir = tmp.file("ckpt");
  CheckpointManager mgr({.dir = dir, .keep = 3, .async = false});
  mgr.save(make_data(1));
  mgr.save(make_data(2));
  // A crashed writer (pid 999999999 cannot exist: above pid_max) and a step dir with no manifest.
  const std::string stale = dir + "/.tmp-step-0000000009-999999999";
  fs::create_directories(stale);
  write_bytes(stale + "/model.safetensors", "partial");
  fs::create_directories(dir + "/step-0000000008");
  write_bytes(dir + "/step-0000000008/model.safetensors", "partial");
  EXPECT_EQ(mgr.list().size(), 2u);
  ::testing::internal::CaptureStderr();
  auto latest = mgr.load_latest();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 2);
  EXPECT_NE(log.find("step-0000000008/MANIFEST.json: missing manifest"), std::string::npos) << log;
  mgr.save(make_data(3));  // retention removes the dead writer's temp dir
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(dir + "/step-0000000008"));  // not ours to judge: left alone
}

TEST(CheckpointManager, ResaveOfSameStepReplacesIt) {
  TempDir tmp;
  CheckpointManager mgr({.dir = tmp.file("ckpt"), .keep = 3, .async = true});
  mgr.save(make_data(7));
  CheckpointData again = make_data(7);
  again.state["epoch"] = 99;
  mgr.save(again);
  mgr.wait();
  ASSERT_EQ(mgr.list().size(), 1u);
  expect_same(*mgr.load_latest(), again);
}

TEST(CheckpointManager, AsyncSaveSnapshotsTheTensors) {
  TempDir tmp;
  CheckpointManager mgr({.dir = tmp.file("ckpt"), .keep = 3, .async = true});
  CheckpointData d = make_data(5);
  // A strided view too: the snapshot must be a copy of its logical contents.
  d.model.emplace_back("fc1.weight.T", d.model[0].second.as_strided({4, 8}, {1, 4}, 0));
  CheckpointData expected = d;
  expected.model.back().second = d.model.back().second.contiguous_raw();
  for (auto* list : {&expected.model, &expected.optimizer})
    for (auto& [name, t] : *list) t = t.clone_raw();
  mgr.save(d);
  for (auto* list : {&d.model, &d.optimizer})  // training goes on mutating in place
    for (auto& [name, t] : *list) t.fill_(42.0);
  d.state["epoch"] = -1;
  mgr.wait();
  expect_same(*mgr.load_latest(), expected);
}

TEST(CheckpointManager, BackgroundErrorIsRethrownByWait) {
  TempDir tmp;
  const std::string parent = tmp.file("parent");
  const std::string dir = parent + "/ckpt";
  CheckpointManager mgr({.dir = dir, .keep = 3, .async = true});
  fs::remove_all(parent);
  write_bytes(parent, "a regular file where a directory should be");
  mgr.save(make_data(1));  // returns: the failure happens on the writer thread
  try {
    mgr.wait();
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(mgr.wait());  // reported once
}

TEST(CheckpointManager, BackgroundErrorIsRethrownByNextSave) {
  TempDir tmp;
  const std::string parent = tmp.file("parent");
  CheckpointManager mgr({.dir = parent + "/ckpt", .keep = 3, .async = true});
  fs::remove_all(parent);
  write_bytes(parent, "x");
  mgr.save(make_data(1));
  EXPECT_THROW(mgr.save(make_data(2)), IoError);
}

TEST(CheckpointManager, BadInputsAndMissingFiles) {
  TempDir tmp;
  CheckpointManager mgr({.dir = tmp.file("ckpt"), .keep = 3, .async = true});
  CheckpointData d = make_data(1);
  d.model.push_back(d.model[0]);
  EXPECT_THROW(mgr.save(d), InvalidArgument);  // duplicate name, caught before the thread
  mgr.save(make_data(2));
  mgr.wait();
  const std::string step = mgr.list().back();
  fs::remove(step + "/state.json");
  try {
    CheckpointManager::load(step);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("missing file " + step + "/state.json"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(CheckpointManager({.dir = tmp.file("f/x"), .keep = -1}), InvalidArgument);
}

// Extra tensor files (per-rank strategy state): written beside the others, in the manifest,
// verified and read back; a torn one fails the load; a bad name is refused at save.
TEST(CheckpointManager, ExtraFilesAreWrittenVerifiedAndReadBack) {
  cohort::testing::TempDir tmp;
  for (bool async : {false, true}) {
    CheckpointManager mgr({.dir = tmp.file(async ? "a" : "s"), .keep = 0, .async = async});
    CheckpointData d = make_data(7);
    d.extra["strategy.rank0"] = {{"residual", randn({5}, 1)}};
    d.extra["strategy.rank1"] = {{"residual", randn({5}, 2)}};
    mgr.save(d);
    mgr.wait();
    CheckpointData back = CheckpointManager::load(mgr.list().back());
    expect_same(back, d);
    ASSERT_EQ(back.extra.size(), 2u);
    EXPECT_TRUE(same_tensors(back.extra["strategy.rank1"], d.extra["strategy.rank1"]));
  }
  CheckpointManager mgr({.dir = tmp.file("s"), .keep = 0, .async = false});
  const std::string file = mgr.list().back() + "/strategy.rank1.safetensors";
  write_bytes(file, "torn");
  try {
    CheckpointManager::load(mgr.list().back());
    FAIL() << "a torn extra file loaded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("strategy.rank1.safetensors"), std::string::npos)
        << e.what();
  }
  CheckpointData bad = make_data(8);
  bad.extra["../escape"] = {{"x", randn({1}, 3)}};
  EXPECT_THROW(mgr.save(bad), InvalidArgument);
}

// The in-memory writer gives the bytes the file writer writes, and they parse back.
TEST(Safetensors, EncodedBytesEqualTheFileAndParseBack) {
  cohort::testing::TempDir tmp;
  const CheckpointData d = make_data(3);
  write_safetensors(tmp.file("m.safetensors"), d.model, {{"k", "v"}});
  const std::vector<uint8_t> bytes = encode_safetensors(d.model, "m", {{"k", "v"}});
  std::ifstream in(tmp.file("m.safetensors"), std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes, file);
  EXPECT_TRUE(same_tensors(parse_safetensors(bytes, "m"), d.model));
}

}  // namespace
}  // namespace cohort::ckpt
