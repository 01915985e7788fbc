#include "cohort/data/mapped_reads.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cohort/core/logging.h"

namespace cohort::data {

MappedReads::MappedReads(uint64_t budget_bytes) : budget_(budget_bytes) {}

void MappedReads::add(std::shared_ptr<const MappedFile> file) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Mapping& m : maps_) {
    if (m.file == file) return;
  }
  const uint64_t granules = file->bytes().size() / kMappedGranuleBytes + 1;
  maps_.push_back({std::move(file), std::vector<uint64_t>(granules / 64 + 1, 0)});
}

void MappedReads::charge(const void* p, uint64_t n) const {
  if (n == 0) return;
  const auto* at = static_cast<const uint8_t*>(p);
  std::lock_guard<std::mutex> lock(mu_);
  for (Mapping& m : maps_) {
    const std::span<const uint8_t> b = m.file->bytes();
    if (b.empty() || at < b.data() || at >= b.data() + b.size()) continue;
    const uint64_t first = uint64_t(at - b.data()) / kMappedGranuleBytes;
    const uint64_t last = (uint64_t(at - b.data()) + n - 1) / kMappedGranuleBytes;
    auto is_new = [&](uint64_t g) { return (m.touched[g / 64] >> (g % 64) & 1) == 0; };
    uint64_t fresh = 0;
    for (uint64_t g = first; g <= last; ++g) fresh += is_new(g) ? kMappedGranuleBytes : 0;
    // Release before the read that would pass the budget, so that the pages it brings in are
    // the first of the next period, not on top of a full one.
    if (fresh > 0 && charged_ > 0 && charged_ + fresh > budget_) release_locked();
    for (uint64_t g = first; g <= last; ++g) {
      if (is_new(g)) charged_ += kMappedGranuleBytes;
      m.touched[g / 64] |= uint64_t(1) << (g % 64);
    }
    return;
  }
}

void MappedReads::release() const {
  std::lock_guard<std::mutex> lock(mu_);
  release_locked();
}

void MappedReads::release_locked() const {
  for (Mapping& m : maps_) {
    std::fill(m.touched.begin(), m.touched.end(), 0);
    if (!m.file->drop_resident_pages() && !warned_) {
      // Only memory is at stake: the data set reads on, its pages stay resident.
      warned_ = true;
      log::warn("data", "cannot release the pages of ", m.file->path(),
                " read so far (madvise MADV_DONTNEED: ", std::strerror(errno),
                "); they stay resident until the data set is closed");
    }
  }
  charged_ = 0;
  ++releases_;
}

uint64_t MappedReads::charged_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return charged_;
}

uint64_t MappedReads::releases() const {
  std::lock_guard<std::mutex> lock(mu_);
  return releases_;
}

}  // namespace cohort::data
