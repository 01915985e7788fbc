#pragma once
// What a block of tensor memory holds, for the per-kind accounting of CpuAllocator::usage()
// (docs/memory.md). A block gets the kind of the MemoryKindScope active on the thread that
// allocates it (kOther outside any); tag_memory (tensor.h) re-attributes it later, for memory
// whose allocation site does not know what it is for (gradients made by autograd, parameters
// made by modules).
#include <cstddef>
#include <cstdint>

namespace cohort {

enum class MemoryKind : uint8_t {
  kOther,  // activations, temporaries, data batches: whatever nobody tagged
  kParameters,
  kGradients,
  kOptimizer,      // optimizer state (momentum, Adam moments)
  kCommunication,  // buffers a strategy communicates from (DDP buckets)
  kCount,
};
constexpr size_t kMemoryKinds = size_t(MemoryKind::kCount);

// "other", "parameters", "gradients", "optimizer", "communication".
const char* memory_kind_name(MemoryKind k);

// The kind new allocations on this thread get.
MemoryKind current_memory_kind();

// While alive, allocations on this thread get `kind`; nests (restores the outer kind).
class MemoryKindScope {
 public:
  explicit MemoryKindScope(MemoryKind kind);
  ~MemoryKindScope();
  MemoryKindScope(const MemoryKindScope&) = delete;
  MemoryKindScope& operator=(const MemoryKindScope&) = delete;

 private:
  MemoryKind outer_;
};

}  // namespace cohort
