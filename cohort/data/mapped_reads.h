#pragma once
// Keeps the pages a memory-mapped data set reads from piling up in the process's resident set.
//
// A page of a read-only MAP_PRIVATE file mapping, once read, stays mapped and counted in the
// process's RSS until the mapping goes: one epoch over a 4 GiB .npy leaves 4 GiB resident. Those
// pages are file-backed and the kernel may reclaim them, but `ps`, a cgroup's memory limit and a
// user comparing RSS with run.memory_limit_mb see them all. So NumpyDataset charges every row it
// reads here, and once more than a budget has been charged since the last release, MappedReads
// drops the pages of every mapping it holds from the resident set (MappedFile::
// drop_resident_pages: they stay in the page cache; the next read faults them back in).
//
// What is charged is what a read may make resident, not its bytes. Linux's page cache holds
// large folios (up to 2 MiB, PMD size on x86-64; ext4, xfs and tmpfs use them) and a fault maps
// a whole folio: on Linux 6.18/ext4, reading 1,000 random rows of 3 KiB from a 400 MiB .npy made
// 372 MiB resident. So a read is charged the 2 MiB granules of the file it touches
// (kMappedGranuleBytes, aligned in file offset as folios are), each once until the next release.
// The data set's resident file pages then stay within the budget (kMappedReadBudget) plus the
// granules of the rows being read at that moment; older kernels that map 64 KiB around a fault
// stay far below it.
//
// Thread safety: get_batch may run on several threads at once (data/dataset.h: a loader's
// prefetch thread, another loader's, the caller's), so charge() and release() take one mutex. A
// thread may be reading a row while another releases: its read faults the pages back in, which is
// correct, and they are counted again at the next charge of their granule.
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "cohort/data/npz.h"

namespace cohort::data {

// The largest piece of a file one page fault maps (a PMD-sized folio on x86-64 and 4 KiB-page
// arm64): the unit reads are charged in.
inline constexpr uint64_t kMappedGranuleBytes = uint64_t(2) << 20;

// How much a data set may charge between two releases. 32 MiB: small beside any memory cap
// worth setting (the process itself takes more: libraries, thread stacks), and 16 granules, so
// that a shuffled epoch releases once per 16 rows read from different granules, not per row: a
// release unmaps each granule's 512 pages, a re-read maps them again, about 4 us per row in all
// (on the 2-core EPYC VM, within 20% of reading the rows with pread).
inline constexpr uint64_t kMappedReadBudget = uint64_t(32) << 20;

class MappedReads {
 public:
  explicit MappedReads(uint64_t budget_bytes = kMappedReadBudget);
  MappedReads(const MappedReads&) = delete;
  MappedReads& operator=(const MappedReads&) = delete;

  // A mapping whose reads are charged and whose pages each release drops. Adding one already
  // held does nothing (x and y may be members of one .npz).
  void add(std::shared_ptr<const MappedFile> file);

  // Counts [p, p + n) as read; call before reading it. Releases first when the granules it
  // touches for the first time since the last release would pass the budget. Bytes outside
  // every mapping held (a deflated .npz member inflated into memory) are not charged.
  void charge(const void* p, uint64_t n) const;

  // Drops every mapping's pages from the resident set now and starts the count over.
  void release() const;

  uint64_t charged_bytes() const;  // since the last release
  uint64_t releases() const;       // how many releases so far

 private:
  struct Mapping {
    std::shared_ptr<const MappedFile> file;
    std::vector<uint64_t> touched;  // one bit per granule charged since the last release
  };
  void release_locked() const;

  const uint64_t budget_;
  mutable std::mutex mu_;  // guards everything below; held for a charge or a release
  mutable std::vector<Mapping> maps_;
  mutable uint64_t charged_ = 0;
  mutable uint64_t releases_ = 0;
  mutable bool warned_ = false;  // a failed madvise is logged once
};

}  // namespace cohort::data
