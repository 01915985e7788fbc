// A NumPy data set larger than MappedReads' budget streams (cohort/data/mapped_reads.h): reading
// every row of a mapped 256 MiB .npy through get_batch, in shuffled order and from two threads
// at once, leaves at most the budget of it resident, with every value right. Resident memory is
// the process's (VmRSS, VmHWM: core/process_memory.h), so each test compares with what was
// resident before it. The control test shows that the measure sees mapped file pages at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "cohort/core/process_memory.h"
#include "cohort/data/mapped_reads.h"
#include "cohort/data/numpy.h"
#include "tests/support/files.h"

namespace cohort::data {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kCols = 1024;   // 4 KiB rows
constexpr int64_t kRows = 65536;  // 256 MiB of float32
constexpr int64_t kBatch = 256;
// Beside the budget: the batches and the allocator's cache (1 MiB each), and the kernel's RSS
// counters, which other CPUs update in batches.
constexpr uint64_t kSlack = uint64_t(16) << 20;

// x[i][j]: exact in float32, different from row to row and column to column.
float streaming_x(int64_t i, int64_t j) {
  return float((i * 31 + j) % 65521);
}

// A .npy header for `dict`, padded so that the data starts at a multiple of 64 (as numpy does).
std::string streaming_npy_header(const std::string& dict) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  return out + header;
}

// dir/x.npy float32 [kRows, kCols] and dir/y.npy int64 [kRows] = i % 10. x is written 1 MiB
// at a time, as numpy writes, so that the page cache holds it in large folios where the kernel
// does that: the case where one read maps the most (mapped_reads.h).
void write_streaming_npy(const fs::path& dir) {
  std::ofstream x(dir / "x.npy", std::ios::binary);
  x << streaming_npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                            std::to_string(kRows) + ", " + std::to_string(kCols) + "), }");
  constexpr int64_t kRowsPerWrite = 256;
  std::vector<float> rows(kRowsPerWrite * kCols);
  for (int64_t i0 = 0; i0 < kRows; i0 += kRowsPerWrite) {
    for (int64_t i = 0; i < kRowsPerWrite; ++i) {
      for (int64_t j = 0; j < kCols; ++j) rows[size_t(i * kCols + j)] = streaming_x(i0 + i, j);
    }
    x.write(reinterpret_cast<const char*>(rows.data()), std::streamsize(rows.size() * 4));
  }
  std::ofstream y(dir / "y.npy", std::ios::binary);
  y << streaming_npy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (" +
                            std::to_string(kRows) + ",), }");
  for (int64_t i = 0; i < kRows; ++i) {
    const int64_t label = i % 10;
    y.write(reinterpret_cast<const char*>(&label), 8);
  }
  ASSERT_TRUE(x.good() && y.good()) << "cannot write " << dir;
}

// Starts VmHWM over from what is resident now (Linux >= 4.0); false where /proc refuses.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return f.good();
}

// Reads `rows` through get_batch in batches of kBatch, checks every value; returns the most
// resident after any batch.
uint64_t read_and_check(const NumpyDataset& d, std::span<const int64_t> rows) {
  uint64_t most = 0;
  for (size_t at = 0; at < rows.size(); at += kBatch) {
    std::span<const int64_t> idx = rows.subspan(at, std::min<size_t>(kBatch, rows.size() - at));
    Batch b = d.get_batch(idx);
    const float* x = b.x.data<float>();
    const int64_t* y = b.y.data<int64_t>();
    for (size_t k = 0; k < idx.size(); ++k) {
      for (int64_t j = 0; j < kCols; ++j) {
        if (x[int64_t(k) * kCols + j] != streaming_x(idx[k], j)) {
          ADD_FAILURE() << "row " << idx[k] << " column " << j << ": " << x[int64_t(k) * kCols + j]
                        << ", expected " << streaming_x(idx[k], j);
          return most;
        }
      }
      if (y[k] != idx[k] % 10) ADD_FAILURE() << "label of row " << idx[k] << ": " << y[k];
    }
    most = std::max(most, process_memory().rss_bytes);
  }
  return most;
}

std::vector<int64_t> shuffled_rows(uint32_t seed) {
  std::vector<int64_t> rows(kRows);
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), std::mt19937(seed));
  return rows;
}

class NumpyStreaming : public ::testing::Test {
 protected:
  // One 256 MiB file for the suite: writing it takes longer than reading it.
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    write_streaming_npy(tmp_->path());
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  static fs::path dir() { return tmp_->path(); }
  static testing::TempDir* tmp_;
};
testing::TempDir* NumpyStreaming::tmp_ = nullptr;

double mib(uint64_t bytes) {
  return double(bytes) / (1 << 20);
}

// The control: a plain mapping read page by page keeps the whole file resident, and
// drop_resident_pages takes it out again.
TEST_F(NumpyStreaming, APlainMappingKeepsWhatWasReadResidentUntilItsPagesAreDropped) {
  const MappedFile map((dir() / "x.npy").string());
  const uint64_t before = process_memory().rss_bytes;
  uint64_t sum = 0;
  for (size_t at = 0; at < map.bytes().size(); at += 4096) sum += map.bytes()[at];
  const uint64_t read = process_memory().rss_bytes;
  EXPECT_GT(read, before + map.bytes().size() * 3 / 4)
      << "read " << mib(map.bytes().size()) << " MiB: resident " << mib(before) << " -> "
      << mib(read) << " MiB (sum " << sum << ")";
  ASSERT_TRUE(map.drop_resident_pages());
  const uint64_t dropped = process_memory().rss_bytes;
  EXPECT_LT(dropped, before + kSlack) << mib(before) << " -> " << mib(dropped) << " MiB";
}

TEST_F(NumpyStreaming, ReadingEveryRowLeavesAtMostTheBudgetResident) {
  const NumpyDataset d({.path = dir().string()});
  ASSERT_EQ(d.size(), kRows);
  const std::vector<int64_t> rows = shuffled_rows(1);
  const uint64_t before = process_memory().rss_bytes;
  const bool peak_reset = reset_peak_rss();
  uint64_t most = read_and_check(d, rows);
  if (peak_reset) most = std::max(most, process_memory().peak_rss_bytes);
  EXPECT_LE(most, before + kMappedReadBudget + kSlack)
      << "reading " << mib(uint64_t(kRows * kCols * 4)) << " MiB took resident memory from "
      << mib(before) << " to " << mib(most) << " MiB; budget " << mib(kMappedReadBudget)
      << " MiB + " << mib(kSlack) << " MiB slack (VmHWM " << (peak_reset ? "" : "not ") << "reset)";
}

// Two threads read halves of the rows at once (the loader's prefetch thread and an evaluation):
// each one's releases drop pages the other is reading, which fault back in with the same bytes.
TEST_F(NumpyStreaming, ConcurrentReadersGetEveryValueWhilePagesAreReleased) {
  const NumpyDataset d({.path = dir().string()});
  const std::vector<int64_t> rows = shuffled_rows(2);
  const std::span<const int64_t> all(rows);
  const uint64_t before = process_memory().rss_bytes;
  uint64_t most[2] = {0, 0};
  std::thread other([&] { most[1] = read_and_check(d, all.subspan(kRows / 2)); });
  most[0] = read_and_check(d, all.first(kRows / 2));
  other.join();
  EXPECT_LE(std::max(most[0], most[1]), before + kMappedReadBudget + 2 * kSlack)
      << mib(before) << " -> " << mib(std::max(most[0], most[1])) << " MiB";
}

// Reads are charged by the 2 MiB granules they touch, each once until a release, which comes
// before the read that would pass the budget; bytes outside the mappings are not charged.
TEST_F(NumpyStreaming, ReadsAreChargedByGranuleAndReleasedPastTheBudget) {
  auto map = std::make_shared<const MappedFile>((dir() / "x.npy").string());
  MappedReads reads(4 * kMappedGranuleBytes);
  reads.add(map);
  reads.add(map);  // once only
  const uint8_t* p = map->bytes().data();
  constexpr uint64_t g = kMappedGranuleBytes;
  reads.charge(p + 10, 100);
  reads.charge(p + g - 50, 20);  // the same granule
  EXPECT_EQ(reads.charged_bytes(), g);
  reads.charge(p + 2 * g - 10, 20);  // across the end of granule 1: granules 1 and 2
  EXPECT_EQ(reads.charged_bytes(), 3 * g);
  const std::vector<uint8_t> elsewhere(100);
  reads.charge(elsewhere.data(), elsewhere.size());  // e.g. an inflated .npz member
  EXPECT_EQ(reads.charged_bytes(), 3 * g);
  reads.charge(p + 5 * g, 1);
  EXPECT_EQ(reads.charged_bytes(), 4 * g);
  EXPECT_EQ(reads.releases(), 0u);
  reads.charge(p + 9 * g, 1);  // would pass 4 granules: release first
  EXPECT_EQ(reads.releases(), 1u);
  EXPECT_EQ(reads.charged_bytes(), g);
  reads.charge(p + 10, 1);  // granule 0 again, counted again after the release
  EXPECT_EQ(reads.charged_bytes(), 2 * g);
}

}  // namespace
}  // namespace cohort::data
