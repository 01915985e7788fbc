#pragma once
// The layout of a shared-memory pair's segment (see shm_pair.h): what both processes map.
// Internal to the shm transport.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "cohort/comm/transport/transport.h"

namespace cohort::comm::transport::shm {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shm rings need lock-free atomics");

// Ring d carries side d's messages to side 1 - d (side 0: the lower rank).
struct RingControl {
  alignas(64) std::atomic<uint64_t> head;  // written by the producer only
  alignas(64) std::atomic<uint64_t> tail;  // written by the consumer only
  // Single copy: how many single-copy messages of ring d the consumer has finished reading.
  // Written by the consumer only; the producer's sends complete as it passes their index.
  alignas(64) std::atomic<uint64_t> single_copy_read;
};

// Side d's doorbell: a futex word side d sleeps on while it waits in the background with
// nothing to do (backoff.h, WaitHint), and `sleeping`, which says so. The other side rings it
// after it published progress (head, tail, acknowledgements) or closed, but only when
// `sleeping` is set, so a pair whose sides poll pays one fence and one load per progress.
struct Doorbell {
  alignas(64) std::atomic<uint32_t> bell;
  std::atomic<uint32_t> sleeping;
};

enum SingleCopyAccess : uint32_t { kUnknown = 0, kCanRead = 1, kCannotRead = 2 };

struct Control {
  std::atomic<uint64_t> magic;
  uint32_t version;
  uint32_t reserved;
  uint64_t ring_bytes;
  std::atomic<int32_t> pid[2];
  std::atomic<uint32_t> closed[2];
  // Where side d mapped this segment in its own address space: the peer's single-copy probe
  // reads `magic` there. Published with pid[d].
  std::atomic<uint64_t> base[2];
  // Whether side d can read side 1 - d's memory (SingleCopyAccess), set by side d's probe.
  std::atomic<uint32_t> can_read[2];
  RingControl ring[2];
  Doorbell door[2];
  // Why a side broke the pair (written before closed[side]); empty for an orderly close.
  char reason[2][1024];
};

constexpr uint64_t kSegmentMagic = 0x636f686f72747368ull;  // "cohortsh"
constexpr uint32_t kSegmentVersion = 3;
constexpr uint32_t kFrameMagic = 0xc0de5a11u;
constexpr size_t kControlBytes = 4096;
constexpr auto kLivenessInterval = std::chrono::milliseconds(10);

enum FrameFlags : uint32_t {
  // The payload is not in the ring: a SingleCopyDescriptor follows the frame.
  kSingleCopy = 1,
};

struct Frame {
  uint32_t magic;
  uint32_t flags;
  uint64_t bytes;
  Header header;
};

// After a kSingleCopy frame: where the payload lies in the sender's address space.
struct SingleCopyDescriptor {
  uint64_t address;
  uint64_t index;  // the sender's single_copy_sent count for this message (checked)
};

static_assert(sizeof(Frame) == 48 && sizeof(Frame) % 8 == 0);
static_assert(sizeof(SingleCopyDescriptor) % 8 == 0);
static_assert(sizeof(Control) <= kControlBytes);

}  // namespace cohort::comm::transport::shm
