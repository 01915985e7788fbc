// `cohort train` as a user runs it: a real process, its exit status, its stderr, its run dir.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <zlib.h>
#include "tests/e2e/run_cli.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

namespace fs = std::filesystem;

using Result = cohort::testing::CliResult;

Result run(const std::string& args) {
  return cohort::testing::run_cli(args);
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("cohort_e2e_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

// An IDX file (big-endian header) gzipped, with `payload` bytes of data after the header.
void write_idx_gz(const fs::path& p, uint32_t magic, std::vector<uint32_t> dims, size_t payload) {
  std::string bytes;
  auto be32 = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(char((v >> s) & 0xff));
  };
  be32(magic);
  for (uint32_t d : dims) be32(d);
  bytes.append(payload, '\0');
  gzFile f = gzopen(p.c_str(), "wb");
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

// A Fashion-MNIST directory with `n` samples per split; `corrupt` edits one file.
fs::path fake_fashion(const std::string& name, size_t n) {
  fs::path d = temp_dir(name);
  for (std::string split : {"train", "t10k"}) {
    write_idx_gz(d / (split + "-images-idx3-ubyte.gz"), 0x803, {uint32_t(n), 28, 28}, n * 784);
    write_idx_gz(d / (split + "-labels-idx1-ubyte.gz"), 0x801, {uint32_t(n)}, n);
  }
  return d;
}

void expect_contains(const Result& r, const std::string& what) {
  EXPECT_NE(r.output.find(what), std::string::npos) << "missing '" << what << "' in:\n" << r.output;
}

TEST(Cli, InvalidTomlIsAnErrorNamingFileAndLine) {
  fs::path d = temp_dir("badtoml");
  write_text(d / "bad.toml", "[optim]\nlr = = 1\n");
  Result r = run("train " + (d / "bad.toml").string());
  EXPECT_EQ(r.status, 2);
  expect_contains(r, "bad.toml:2");
  expect_contains(r, "invalid TOML");
}

TEST(Cli, UnknownKeySuggestsTheRightOne) {
  fs::path d = temp_dir("unknown");
  write_text(d / "typo.toml", "[optim]\nmomentun = 0.9\n");
  Result r = run("train " + (d / "typo.toml").string());
  EXPECT_EQ(r.status, 2);
  expect_contains(r, "unknown config key 'optim.momentun'");
  expect_contains(r, "did you mean 'optim.momentum'");
  r = run("train " + (d / "typo.toml").string() + " --set optim.lrr=1");
  EXPECT_EQ(r.status, 2);
}

TEST(Cli, MissingDatasetDirectoryIsNamed) {
  fs::path d = temp_dir("nodata");
  Result r = run("train /dev/null --set data.path=" + (d / "nowhere").string());
  EXPECT_NE(r.status, 0);
  expect_contains(r, "nowhere");
  expect_contains(r, "cohort: error:");
}

TEST(Cli, TruncatedDatasetFileIsNamed) {
  fs::path d = fake_fashion("truncated", 100);
  write_idx_gz(d / "train-images-idx3-ubyte.gz", 0x803, {100, 28, 28}, 5000);
  Result r = run("train /dev/null --set data.path=" + d.string());
  EXPECT_NE(r.status, 0);
  expect_contains(r, "train-images-idx3-ubyte.gz");
  expect_contains(r, "expected 78416 bytes");  // what the header promised
}

TEST(Cli, WrongIdxMagicIsNamed) {
  fs::path d = fake_fashion("magic", 100);
  write_idx_gz(d / "t10k-labels-idx1-ubyte.gz", 0x803, {100}, 100);
  Result r = run("train /dev/null --set data.path=" + d.string());
  EXPECT_NE(r.status, 0);
  expect_contains(r, "t10k-labels-idx1-ubyte.gz");
  expect_contains(r, "0x00000801");
}

TEST(Cli, IncompatibleModelAndDataIsAConfigError) {
  Result r = run("train /dev/null --set model.type=gpt --set data.dataset=synthetic");
  EXPECT_EQ(r.status, 2);
  expect_contains(r, "needs data.dataset = \"text\"");
}

// A short real run: progress lines, an evaluation, and metrics.jsonl with every record kind.
TEST(Cli, SyntheticRunWritesMetricsAndLearns) {
  fs::path d = temp_dir("run");
  Result r =
      run("train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=2048"
          " --set run.dir=" +
          d.string() +
          " --set run.name=syn --set run.progress=plain"
          " --set run.log_every=8 --set train.epochs=2 --set optim.lr=0.01");
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r, "eval (test) after step 32");
  expect_contains(r, "done: 64 steps");
  std::ifstream in(d / "syn" / "metrics.jsonl");
  std::string line;
  std::map<std::string, int> kinds;
  double accuracy = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    kinds[j["event"]]++;
    if (j["event"] == "summary") accuracy = j["eval_accuracy"];
  }
  EXPECT_EQ(kinds["start"], 1);
  EXPECT_EQ(kinds["step"], 8);
  EXPECT_EQ(kinds["eval"], 2);
  EXPECT_EQ(kinds["summary"], 1);
  EXPECT_GT(accuracy, 0.5);  // 10 well-separated classes: chance is 0.1
  EXPECT_TRUE(fs::exists(d / "syn" / "config.toml"));
}

}  // namespace
