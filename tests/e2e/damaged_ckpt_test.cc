// A corpus of damaged checkpoints, each tried the ways a user meets it: `cohort ckpt inspect`,
// `cohort ckpt reshard`, and `cohort train --resume` with one process and with 2 workers.
// Every case must fail with exit status 1 and an error naming the damaged file, never a signal
// (a single-process resume once died with SIGSEGV after printing the right error).
//
// The source is a real run's checkpoint re-cut into 2 shards, so every file a sharded
// checkpoint has is damaged in turn: missing, empty, truncated, one byte longer (the manifest
// catches these), plus damage the manifest was updated to match ("re-signed"), which only the
// readers behind it can catch: a torn state.json, huge shapes, piece sizes and worlds in the
// shard index, a huge safetensors header, and a shard file that does not belong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "cohort/ckpt/file_io.h"
#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/files.h"

namespace cohort::testing {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr char kStep[] = "step-0000000016";  // 256 samples / batch 16, one epoch
constexpr char kShard0[] = "shard-00000-of-00002.safetensors";
constexpr char kShard1[] = "shard-00001-of-00002.safetensors";
const std::string kTrain =
    "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=256 "
    "--set train.epochs=1";

// The manifest entry of `name` made to match the file's bytes now: the damage gets past the
// manifest and must be caught by the reader of that file.
void resign(const fs::path& step, const std::string& name) {
  const fs::path mpath = step / "MANIFEST.json";
  json m = json::parse(read_bytes(mpath.string()));
  uint64_t size = 0;
  const std::string sha = ckpt::internal::sha256_file((step / name).string(), &size);
  m["files"][name] = {{"size", size}, {"sha256", sha}};
  write_bytes(mpath.string(), m.dump(2));
}

void edit_state(const fs::path& step, const std::function<void(json&)>& edit) {
  const fs::path p = step / "state.json";
  json j = json::parse(read_bytes(p.string()));
  edit(j);
  write_bytes(p.string(), j.dump());
  resign(step, "state.json");
}

// Rewrites a safetensors header (its JSON edited), keeping the data section.
void edit_safetensors_header(const fs::path& file, const std::function<void(json&)>& edit) {
  const std::string bytes = read_bytes(file.string());
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  json h = json::parse(bytes.substr(8, n));
  edit(h);
  std::string text = h.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  const uint64_t len = text.size();
  std::string out(reinterpret_cast<const char*>(&len), 8);
  write_bytes(file.string(), out + text + bytes.substr(8 + n));
}

struct Damage {
  std::string name;  // the test's name
  std::string file;  // the file damaged; the error must name it
  std::function<void(const fs::path& step)> apply;
};

// gtest prints a case by its name, not its bytes.
void PrintTo(const Damage& d, std::ostream* os) {
  *os << d.name;
}

void truncate_to(const fs::path& p, uintmax_t size) {
  fs::resize_file(p, size);
}

// Missing, empty, truncated and grown: each file of the checkpoint, caught by the manifest
// (or, for the manifest itself, by its parser).
std::vector<Damage> file_damages() {
  std::vector<Damage> out;
  const std::pair<const char*, std::string> files[] = {{"Manifest", "MANIFEST.json"},
                                                       {"State", "state.json"},
                                                       {"Model", "model.safetensors"},
                                                       {"Optimizer", "optimizer.safetensors"},
                                                       {"Shard0", kShard0},
                                                       {"Shard1", kShard1}};
  for (const auto& [tag, file] : files) {
    const std::string f = file;
    out.push_back({std::string(tag) + "Missing", f, [f](const fs::path& s) { fs::remove(s / f); }});
    out.push_back(
        {std::string(tag) + "Empty", f, [f](const fs::path& s) { truncate_to(s / f, 0); }});
    out.push_back({std::string(tag) + "Truncated", f,
                   [f](const fs::path& s) { truncate_to(s / f, fs::file_size(s / f) / 2); }});
    out.push_back({std::string(tag) + "OneByteLonger", f, [f](const fs::path& s) {
                     write_bytes((s / f).string(), read_bytes((s / f).string()) + "x");
                   }});
  }
  return out;
}

// Damage the manifest agrees with: the readers of state.json and of the shard files must
// catch it.
std::vector<Damage> resigned_damages() {
  const std::string shard0 = kShard0;
  return {
      {"StateTornResigned", "state.json",
       [](const fs::path& s) {
         truncate_to(s / "state.json", fs::file_size(s / "state.json") / 2);
         resign(s, "state.json");
       }},
      {"IndexHugeShape", "state.json",
       [](const fs::path& s) {
         edit_state(s, [](json& j) {
           j["shards"]["tensors"][0]["shape"] = {int64_t(1) << 40, int64_t(1) << 40};
         });
       }},
      {"IndexHugePiece", "state.json",
       [](const fs::path& s) {
         edit_state(s, [](json& j) {
           j["shards"]["tensors"][0]["pieces"][0]["numel"] = int64_t(1) << 62;
         });
       }},
      {"IndexHugeWorld", "state.json",
       [](const fs::path& s) {
         edit_state(s, [](json& j) { j["shards"]["world"] = 2000000000; });
       }},
      {"ShardHugeHeaderLength", shard0,
       [shard0](const fs::path& s) {
         std::string b = read_bytes((s / shard0).string());
         const uint64_t huge = uint64_t(1) << 62;
         std::memcpy(b.data(), &huge, 8);
         write_bytes((s / shard0).string(), b);
         resign(s, shard0);
       }},
      {"ShardHugeShape", shard0,
       [shard0](const fs::path& s) {
         edit_safetensors_header(s / shard0, [](json& h) {
           for (auto& [key, t] : h.items())
             if (key != "__metadata__") t["shape"] = {int64_t(1) << 40};
         });
         resign(s, shard0);
       }},
      {"ExtraShardUnlisted", "shard-00002-of-00003.safetensors",
       [shard0](const fs::path& s) {
         fs::copy_file(s / shard0, s / "shard-00002-of-00003.safetensors");
       }},
      {"ExtraShardInManifestNotIndex", "shard-00002-of-00003.safetensors",
       [shard0](const fs::path& s) {
         fs::copy_file(s / shard0, s / "shard-00002-of-00003.safetensors");
         resign(s, "shard-00002-of-00003.safetensors");
       }},
  };
}

std::vector<Damage> all_damages() {
  std::vector<Damage> out = file_damages();
  for (Damage& d : resigned_damages()) out.push_back(std::move(d));
  return out;
}

// A 2-shard checkpoint of a one-epoch synthetic run, made once per test process.
const fs::path& source_step() {
  static const fs::path step = [] {
    const fs::path d = fresh_dir("damaged_ckpt_src_", "run");
    const CliResult r = run_cli(kTrain + " --set data.batch_size=16 --set run.dir=" + d.string() +
                                " --set run.name=a");
    EXPECT_EQ(r.status, 0) << r.output;
    const CliResult s = run_cli("ckpt reshard " + (d / "a" / "checkpoints").string() + " " +
                                (d / "sharded").string() + " --world 2");
    EXPECT_EQ(s.status, 0) << s.output;
    return d / "sharded" / kStep;
  }();
  return step;
}

class DamagedCheckpoint : public ::testing::TestWithParam<Damage> {
 protected:
  // A copy of the source checkpoint with this case's damage; the run dir for resumes beside it.
  void SetUp() override {
    ASSERT_TRUE(fs::is_directory(source_step())) << source_step();
    root_ = fresh_dir("damaged_ckpt_", GetParam().name);
    step_ = root_ / "ckpt" / kStep;
    fs::create_directories(step_.parent_path());
    fs::copy(source_step(), step_);
    GetParam().apply(step_);
  }

  // Exit status 1, no signal, and the damaged file named.
  void expect_clean_failure(const CliResult& r, const std::string& what) {
    EXPECT_EQ(r.status, 1) << what << ":\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(GetParam().file)) << what;
    EXPECT_THAT(r.output, ::testing::Not(HasSubstr("unexpected error"))) << what;
  }

  std::string resume(const std::string& extra) {
    return kTrain + " --set run.dir=" + (root_ / "runs").string() + " --resume " + step_.string() +
           " " + extra;
  }

  fs::path root_, step_;
};

TEST_P(DamagedCheckpoint, InspectAndReshardFailNamingTheFile) {
  expect_clean_failure(run_cli("ckpt inspect " + step_.string()), "ckpt inspect");
  expect_clean_failure(
      run_cli("ckpt reshard " + step_.string() + " " + (root_ / "out").string() + " --world 1"),
      "ckpt reshard");
  EXPECT_FALSE(fs::exists(root_ / "out" / kStep)) << "a damaged checkpoint was re-cut";
}

TEST_P(DamagedCheckpoint, ResumeFailsNamingTheFileWithOneProcess) {
  expect_clean_failure(run_cli(resume("--set data.batch_size=16")), "resume, 1 process");
}

TEST_P(DamagedCheckpoint, ResumeFailsNamingTheFileWithTwoWorkers) {
  expect_clean_failure(run_cli(resume("--set data.batch_size=8 --workers 2")), "resume, 2 workers");
}

INSTANTIATE_TEST_SUITE_P(Corpus, DamagedCheckpoint, ::testing::ValuesIn(all_damages()),
                         [](const auto& info) { return info.param.name; });

// The control: the undamaged copy resumes (so the failures above are the damage's doing) and
// `ckpt reshard` names --world when it is out of range instead of running out of memory.
TEST(DamagedCheckpointControl, TheUndamagedCopyResumesAndReshardChecksWorld) {
  const fs::path root = fresh_dir("damaged_ckpt_", "control");
  const std::string step = source_step().string();
  CliResult r =
      run_cli(kTrain + " --set data.batch_size=16 --set run.dir=" + (root / "runs").string() +
              " --resume " + step);
  EXPECT_EQ(r.status, 0) << r.output;
  r = run_cli(kTrain + " --set data.batch_size=8 --workers 2 --set run.dir=" +
              (root / "runs2").string() + " --resume " + step);
  EXPECT_EQ(r.status, 0) << r.output;
  r = run_cli("ckpt reshard " + step + " " + (root / "out").string() + " --world 2000000000");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--world"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("bad_alloc")));
}

}  // namespace
}  // namespace cohort::testing
