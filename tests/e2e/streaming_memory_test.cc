// Streaming (docs/data.md, "Data larger than memory"): a NumPy data set 4x larger than
// run.memory_limit_mb trains one epoch with `cohort train --workers 2`, and each worker's tensor
// peak and its whole process's peak resident memory (VmHWM) stay under the cap.
//
// The cap is the smallest that leaves room over what a worker needs before it reads any data:
// a first run on a tiny data set measures that baseline (code, libraries, thread stacks). Where
// cohort links cuBLASLt the baseline is about 190 MiB (its 84 MiB of zero-initialised tables
// alone), so the cap is 256 MiB and the data 1 GiB; without it the cap is 96 MiB. The figures
// go to the test's XML properties (--gtest_output=xml).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::last_record;
using testing::run_cli;

constexpr int64_t kFeatures = 784;
constexpr int64_t kRowBytes = kFeatures * 4;
constexpr int64_t kMiB = 1 << 20;
// Over the baseline: the data set's resident pages (kMappedReadBudget, 32 MiB), the batches in
// flight (3 MiB each at batch 1024) and the heap's growth; measured: 30 MiB.
constexpr int64_t kHeadroomMiB = 48;

// A .npy header for `dict`, padded so that the data starts at byte 128 (as numpy does).
std::string stream_npy_header(const std::string& dict) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  return out + header;
}

// dir/x.npy float32 [rows, 784] and dir/y.npy int64 [rows]: row i is row i % 1009 of a pool of
// uniform values in [-1, 1), and its label (4 classes) the signs of its first two features, so
// that the model learns it. Written from the pool, 3 MiB at a time: a 1 GiB file in a second.
void write_stream_data(const fs::path& dir, int64_t rows) {
  constexpr int64_t kPool = 1009;
  std::vector<float> pool(size_t(kPool * kFeatures));
  uint32_t state = 12345;
  for (float& v : pool) {
    state = state * 1664525u + 1013904223u;
    v = float(state >> 8) / float(1 << 23) - 1.0f;
  }
  std::ofstream x(dir / "x.npy", std::ios::binary);
  x << stream_npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                         std::to_string(rows) + ", " + std::to_string(kFeatures) + "), }");
  for (int64_t i = 0; i < rows; i += kPool) {
    const int64_t n = std::min(kPool, rows - i);
    x.write(reinterpret_cast<const char*>(pool.data()), std::streamsize(n * kRowBytes));
  }
  std::ofstream y(dir / "y.npy", std::ios::binary);
  y << stream_npy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (" +
                         std::to_string(rows) + ",), }");
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = &pool[size_t((i % kPool) * kFeatures)];
    const int64_t label = (row[0] > 0 ? 1 : 0) + (row[1] > 0 ? 2 : 0);
    y.write(reinterpret_cast<const char*>(&label), 8);
  }
  ASSERT_TRUE(x.good() && y.good()) << "cannot write " << dir;
}

testing::CliResult train_numpy(const fs::path& data, const fs::path& runs, const std::string& name,
                               int64_t cap_mib) {
  return run_cli("train " COHORT_SOURCE_DIR
                 "/examples/fashion_mlp.toml --workers 2 --set model.hidden=[32]"
                 " --set data.dataset=numpy --set data.path=" +
                 data.string() +
                 " --set data.batch_size=1024 --set train.epochs=1 --set optim.lr=0.1"
                 " --set run.progress=none --set ckpt.enabled=false --set run.dir=" +
                 runs.string() + " --set run.name=" + name +
                 (cap_mib > 0 ? " --set run.memory_limit_mb=" + std::to_string(cap_mib) : ""));
}

// Each rank's summary record.
std::vector<nlohmann::json> stream_summaries(const fs::path& run) {
  return {last_record(run / "metrics.jsonl", "summary"),
          last_record(run / "metrics.rank1.jsonl", "summary")};
}

TEST(StreamingMemory, ANumpyDataSetFourTimesTheCapTrainsUnderIt) {
  const fs::path d = testing::fresh_dir("cohort_streaming_", "numpy");
  fs::create_directories(d / "small");
  fs::create_directories(d / "big");
  write_stream_data(d / "small", 4000);
  testing::CliResult base = train_numpy(d / "small", d / "runs", "baseline", 0);
  ASSERT_EQ(base.status, 0) << base.output;
  int64_t baseline = 0;
  for (const nlohmann::json& s : stream_summaries(d / "runs" / "baseline"))
    baseline = std::max(baseline, s.at("process_peak_rss_bytes").get<int64_t>());
  ASSERT_GT(baseline, 0) << "no process_peak_rss_bytes: not Linux?";
  const int64_t cap_mib = std::max<int64_t>(96, (baseline / kMiB + kHeadroomMiB + 31) / 32 * 32);
  if (cap_mib > 512) GTEST_SKIP() << "a worker starts at " << baseline / kMiB << " MiB resident";
  const int64_t cap = cap_mib * kMiB;

  write_stream_data(d / "big", 4 * cap / kRowBytes + 1);
  const uint64_t data_bytes = fs::file_size(d / "big" / "x.npy");
  ASSERT_GE(data_bytes, uint64_t(4 * cap));
  testing::CliResult r = train_numpy(d / "big", d / "runs", "big", cap_mib);
  ASSERT_EQ(r.status, 0) << r.output;
  SCOPED_TRACE("cap " + std::to_string(cap_mib) + " MiB, baseline " +
               std::to_string(baseline / kMiB) + " MiB, data " + std::to_string(data_bytes / kMiB) +
               " MiB");
  EXPECT_TRUE(contains(r, "; process peak RSS ")) << r.output;
  EXPECT_FALSE(contains(r, "is above run.memory_limit_mb")) << r.output;
  int rank = 0;
  RecordProperty("cap_mib", std::to_string(cap_mib));
  RecordProperty("baseline_peak_rss_mib", std::to_string(baseline / kMiB));
  RecordProperty("data_mib", std::to_string(data_bytes / kMiB));
  for (const nlohmann::json& s : stream_summaries(d / "runs" / "big")) {
    ASSERT_FALSE(s.is_null()) << "rank " << rank;
    EXPECT_LE(s.at("memory_peak_run_bytes").get<int64_t>(), cap) << "rank " << rank;
    EXPECT_LE(s.at("process_peak_rss_bytes").get<int64_t>(), cap)
        << "rank " << rank << ": " << s.at("process_peak_rss_bytes").get<int64_t>() / kMiB
        << " MiB";
    EXPECT_EQ(s.at("memory_limit_bytes").get<int64_t>(), cap);
    EXPECT_GT(s.value("eval_accuracy", 0.0), 0.6) << "rank " << rank;
    RecordProperty("rank" + std::to_string(rank) + "_peak_rss_mib",
                   std::to_string(s.at("process_peak_rss_bytes").get<int64_t>() / kMiB));
    ++rank;
  }
}

}  // namespace
}  // namespace cohort
