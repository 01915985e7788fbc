// Memory accounting by kind (tensor/allocator.h, tag_memory in tensor.h) and the per-process
// limit, alone and through the trainer (run.memory_limit_mb, the summary's memory fields).
// The allocator is the process's: each check compares against what was in use before it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "cohort/core/logging.h"
#include "cohort/core/process_memory.h"
#include "cohort/tensor/allocator.h"
#include "cohort/tensor/tensor.h"
#include "cohort/train/config/train_config.h"
#include "cohort/train/memory_account.h"
#include "cohort/train/trainer.h"
#include "tests/e2e/run_dirs.h"

namespace cohort {
namespace {

CpuAllocator& alloc() {
  return CpuAllocator::instance();
}
uint64_t in_use(MemoryKind k) {
  return alloc().usage()[k];
}

// Clears a limit a test set, whether or not it passes.
struct LimitGuard {
  ~LimitGuard() { alloc().set_limit(0); }
};

TEST(MemoryAccounting, ScopeCountsAllocationsAsItsKindUntilFreed) {
  MemoryUsage before = alloc().usage();
  const uint64_t r = CpuAllocator::round_size(1000 * 4);
  {
    MemoryKindScope scope(MemoryKind::kOptimizer);
    Tensor t = zeros({1000});
    EXPECT_EQ(t.impl().storage->memory_kind(), MemoryKind::kOptimizer);
    EXPECT_EQ(in_use(MemoryKind::kOptimizer), before[MemoryKind::kOptimizer] + r);
    EXPECT_EQ(in_use(MemoryKind::kOther), before[MemoryKind::kOther]);
    EXPECT_EQ(alloc().usage().total, before.total + r);
  }
  EXPECT_EQ(in_use(MemoryKind::kOptimizer), before[MemoryKind::kOptimizer]);
  EXPECT_EQ(alloc().usage().total, before.total);
}

TEST(MemoryAccounting, ScopesNestAndOtherThreadsKeepTheirKind) {
  EXPECT_EQ(current_memory_kind(), MemoryKind::kOther);
  {
    MemoryKindScope a(MemoryKind::kParameters);
    {
      MemoryKindScope b(MemoryKind::kCommunication);
      EXPECT_EQ(current_memory_kind(), MemoryKind::kCommunication);
    }
    EXPECT_EQ(current_memory_kind(), MemoryKind::kParameters);
    MemoryKind seen = MemoryKind::kCount;
    std::thread([&] { seen = current_memory_kind(); }).join();
    EXPECT_EQ(seen, MemoryKind::kOther);
  }
  EXPECT_EQ(current_memory_kind(), MemoryKind::kOther);
}

TEST(MemoryAccounting, TagMovesTheWholeStorageOnceAndItsFreeReturnsIt) {
  MemoryUsage before = alloc().usage();
  const uint64_t r = CpuAllocator::round_size(300 * 4);
  auto delta = [&](MemoryKind k) { return int64_t(in_use(k)) - int64_t(before[k]); };
  {
    Tensor t = empty({300});
    EXPECT_EQ(delta(MemoryKind::kOther), int64_t(r));
    tag_memory(t.slice(0, 10, 20), MemoryKind::kGradients);  // a view: its whole storage moves
    EXPECT_EQ(delta(MemoryKind::kOther), 0);
    EXPECT_EQ(delta(MemoryKind::kGradients), int64_t(r));
    tag_memory(t, MemoryKind::kGradients);  // already: nothing moves
    EXPECT_EQ(delta(MemoryKind::kGradients), int64_t(r));
    tag_memory(t, MemoryKind::kParameters);
    EXPECT_EQ(delta(MemoryKind::kGradients), 0);
    EXPECT_EQ(delta(MemoryKind::kParameters), int64_t(r));
    EXPECT_EQ(alloc().usage().total, before.total + r);  // moved, not added
    tag_memory(Tensor(), MemoryKind::kParameters);       // undefined: nothing
  }
  for (size_t k = 0; k < kMemoryKinds; ++k)
    EXPECT_EQ(delta(MemoryKind(k)), 0) << memory_kind_name(MemoryKind(k));
}

// A block the cache hands out again counts as its new user's kind, not its last one's.
TEST(MemoryAccounting, ACachedBlockReusedCountsAsTheNewKind) {
  MemoryUsage before = alloc().usage();
  { Tensor t = empty({5000}); }  // now cached
  uint64_t hits = alloc().stats().cache_hits;
  MemoryKindScope scope(MemoryKind::kCommunication);
  Tensor t = empty({5000});
  EXPECT_EQ(alloc().stats().cache_hits, hits + 1);
  EXPECT_EQ(in_use(MemoryKind::kCommunication),
            before[MemoryKind::kCommunication] + CpuAllocator::round_size(5000 * 4));
  EXPECT_EQ(in_use(MemoryKind::kOther), before[MemoryKind::kOther]);
}

TEST(MemoryAccounting, ExternalMemoryCountsOnlyOnceTaggedAtItsExactSize) {
  std::vector<float> buffer(1001);
  MemoryUsage before = alloc().usage();
  AllocatorStats stats = alloc().stats();
  {
    Tensor t = from_external(buffer.data(), {1001}, DType::f32, nullptr);
    EXPECT_EQ(alloc().usage().total, before.total);  // not the allocator's: not counted yet
    tag_memory(t, MemoryKind::kCommunication);
    EXPECT_EQ(in_use(MemoryKind::kCommunication), before[MemoryKind::kCommunication] + 4004);
  }
  EXPECT_EQ(alloc().usage().total, before.total);
  // Freeing it gave nothing to the allocator's cache (empty_cache would free() it).
  EXPECT_EQ(alloc().stats().bytes_cached, stats.bytes_cached);
  EXPECT_EQ(alloc().stats().bytes_in_use, stats.bytes_in_use);
}

TEST(MemoryAccounting, PeaksPerKindAndInTotalUntilReset) {
  alloc().reset_peak();
  MemoryUsage before = alloc().usage();
  EXPECT_EQ(before.peak_total, before.total);
  const uint64_t r = CpuAllocator::round_size(1 << 20);
  {
    MemoryKindScope scope(MemoryKind::kCommunication);
    Tensor a = empty({1 << 18});
    Tensor b = empty({1 << 18});
  }
  MemoryUsage after = alloc().usage();
  EXPECT_EQ(after.total, before.total);
  EXPECT_EQ(after.peak(MemoryKind::kCommunication), before[MemoryKind::kCommunication] + 2 * r);
  EXPECT_EQ(after.peak_total, before.total + 2 * r);
  alloc().reset_peak();
  EXPECT_EQ(alloc().usage().peak(MemoryKind::kCommunication), before[MemoryKind::kCommunication]);
}

TEST(MemoryAccounting, LimitErrorNamesRequestUseLimitSettingAndKinds) {
  LimitGuard guard;
  Tensor held = empty({1 << 16});  // 256 KiB in use whatever else is
  MemoryUsage before = alloc().usage();
  alloc().set_limit(before.total + (1 << 20), "test.limit_mb");
  EXPECT_EQ(alloc().usage().limit, before.total + (1 << 20));
  try {
    MemoryKindScope scope(MemoryKind::kOptimizer);
    Tensor t = empty({1 << 19});  // 2 MiB
    FAIL() << "no error";
  } catch (const MemoryLimitExceeded& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("allocating 2.0 MiB (2097152 bytes)"), std::string::npos) << m;
    EXPECT_NE(m.find(detail::str("(", before.total, " bytes) in use")), std::string::npos) << m;
    EXPECT_NE(m.find(detail::str("(", before.total + (1 << 20), " bytes) set by test.limit_mb")),
              std::string::npos)
        << m;
    for (const char* k : {"parameters", "gradients", "optimizer", "communication", "other"})
      EXPECT_NE(m.find(k), std::string::npos) << k << " in " << m;
  }
  EXPECT_EQ(alloc().usage().total, before.total);  // the refused request left no count behind
  // Cached blocks are not in use: freeing makes room again.
  held = Tensor();
  Tensor fits = empty({(1 << 18) + (1 << 16)});  // 1.25 MiB: fits only with `held` gone
  alloc().set_limit(0);
  Tensor big = empty({1 << 20});  // no limit
}

// Accounting and the limit through a real run: the default MLP on synthetic data.
std::vector<std::string> small_job(const std::string& name, bool momentum) {
  return {"data.dataset=synthetic",
          "data.synthetic_samples=256",
          "data.batch_size=64",
          "model.hidden=[64]",
          "train.max_steps=3",
          momentum ? "optim.momentum=0.9" : "optim.momentum=0",
          "run.threads=1",
          "run.progress=none",
          "ckpt.enabled=false",
          "run.name=" + name,
          "run.dir=" + testing::fresh_dir("cohort_memory_", name).string()};
}

uint64_t counted_bytes(const std::vector<Tensor>& ts) {
  uint64_t n = 0;
  for (const Tensor& t : ts) n += CpuAllocator::round_size(t.nbytes());
  return n;
}

TEST(MemoryAccountingTrain, SummaryRecordCarriesBytesByKindAndPeaks) {
  std::vector<std::string> job = small_job("summary", /*momentum=*/true);
  train::Trainer t(train::load_config("/dev/null", job));
  train::TrainSummary sum = t.run();
  std::vector<Tensor> params = t.model().parameters();
  nlohmann::json j = testing::last_record(sum.run_dir + "/metrics.jsonl", "summary");
  ASSERT_FALSE(j.is_null());
  const nlohmann::json& b = j["memory_bytes"];
  uint64_t p = counted_bytes(params);
  int64_t numel = t.model().num_parameters();
  EXPECT_EQ(b["parameters"].get<uint64_t>(), p);
  EXPECT_GE(p, uint64_t(4 * numel));
  EXPECT_LE(p, uint64_t(4 * numel) * 9 / 8 + 64 * params.size());  // the allocator's rounding
  EXPECT_EQ(b["gradients"].get<uint64_t>(), p);                    // one gradient per parameter
  EXPECT_EQ(b["optimizer"].get<uint64_t>(), p);                    // SGD momentum: one slot
  EXPECT_EQ(b["communication"].get<uint64_t>(), 0u);               // one process: none
  EXPECT_TRUE(b.contains("other"));
  EXPECT_GE(j["memory_peak_bytes"].get<uint64_t>(), 3 * p);
  EXPECT_GE(j["memory_peak_by_kind"]["gradients"].get<uint64_t>(), p);
  EXPECT_EQ(j["memory_limit_bytes"].get<uint64_t>(), 0u);
  // The process holds its tensors and more (code, libraries, stacks).
  EXPECT_GE(j["process_peak_rss_bytes"].get<uint64_t>(),
            j["memory_peak_run_bytes"].get<uint64_t>());
}

// run.memory_limit_mb caps tensors; a process whose resident memory passed it is warned, with
// the key, both figures and what the key does not cover, and the run still succeeds.
TEST(MemoryAccountingTrain, ProcessRssAboveTheLimitIsAWarningNotAnError) {
  std::vector<std::string> job = small_job("rss_warning", /*momentum=*/false);
  job.push_back("run.memory_limit_mb=8");  // tensors: well under 1 MiB; the process: far more
  log::ScopedCapture logs;
  train::Trainer t(train::load_config("/dev/null", job));
  train::TrainSummary sum = t.run();
  nlohmann::json j = testing::last_record(sum.run_dir + "/metrics.jsonl", "summary");
  ASSERT_GT(j["process_peak_rss_bytes"].get<uint64_t>(), uint64_t(8) << 20) << j.dump();
  EXPECT_EQ(logs.count("process peak RSS "), 1u) << logs.text();
  EXPECT_EQ(logs.count("is above run.memory_limit_mb = 8 (8.0 MiB); that key caps tensor memory"),
            1u)
      << logs.text();
}

TEST(MemoryAccounting, RssWarningOnlyWhenALimitIsSetAndPassed) {
  using train::rss_over_limit_warning;
  constexpr uint64_t kMiB = 1 << 20;
  EXPECT_EQ(rss_over_limit_warning(0, 10 * kMiB, 500 * kMiB), "");           // no limit
  EXPECT_EQ(rss_over_limit_warning(256 * kMiB, 10 * kMiB, 256 * kMiB), "");  // at it
  EXPECT_EQ(rss_over_limit_warning(256 * kMiB, 10 * kMiB, 0), "");           // unknown
  EXPECT_EQ(rss_over_limit_warning(96 * kMiB, 12 * kMiB + kMiB / 2, 200 * kMiB),
            "process peak RSS 200.0 MiB is above run.memory_limit_mb = 96 (96.0 MiB); that key "
            "caps tensor memory (peak 12.5 MiB), not the process's resident memory: code and "
            "libraries, thread stacks, the heap, mapped files (docs/memory.md)");
}

TEST(MemoryAccounting, ProcessStatusGivesRssAndItsHighWaterMarkInBytes) {
  const ProcessMemory m = parse_process_status(
      "Name:\tcohort\nVmPeak:\t  900 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n");
  EXPECT_EQ(m.rss_bytes, 1024u * 1024);
  EXPECT_EQ(m.peak_rss_bytes, 2048u * 1024);
  EXPECT_EQ(parse_process_status("Name: x\n").peak_rss_bytes, 0u);
  const ProcessMemory self = process_memory();  // this process, on Linux
  EXPECT_GT(self.rss_bytes, 0u);
  EXPECT_GE(self.peak_rss_bytes, self.rss_bytes);
}

TEST(MemoryAccountingTrain, RunPastTheMemoryLimitFailsNamingTheKey) {
  std::vector<std::string> job = small_job("limit", /*momentum=*/true);
  job.push_back("model.hidden=[1024,1024]");  // ~1.9M parameters: 7.5 MiB, past 4 MiB
  job.push_back("run.memory_limit_mb=4");
  try {
    train::Trainer t(train::load_config("/dev/null", job));
    t.run();
    FAIL() << "no error";
  } catch (const MemoryLimitExceeded& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("run.memory_limit_mb = 4"), std::string::npos) << m;
    EXPECT_NE(m.find("4194304 bytes"), std::string::npos) << m;
  }
  EXPECT_EQ(alloc().usage().limit, 0u);  // the failed Trainer cleared its limit
}

TEST(MemoryAccountingTrain, NegativeLimitIsRejected) {
  std::vector<std::string> job = small_job("negative", false);
  job.push_back("run.memory_limit_mb=-1");
  EXPECT_THROW(train::load_config("/dev/null", job), InvalidArgument);
}

}  // namespace
}  // namespace cohort
