#pragma once
// SharedBuffer: memory from a communicator's shared arena (transport/shm/shm_arena.h).
// Collectives whose buffers lie in the arenas of all ranks read peers' buffers in place, one
// pass over memory instead of two copies through the rings (Algorithm::kSharedBuffers):
//
//   comm::SharedBuffer grad = world->alloc_shared(n * sizeof(float));
//   if (!grad) { ... fall back to ordinary memory: no arena here (ranks on several hosts) }
//   comm::allreduce(*world, {.output = grad.data(), .count = n});
//
// Every rank must pass arena buffers for the same call (or none): the algorithm is chosen from
// them and a rank that chose otherwise fails the call with a CollectiveMismatch naming both.
// The buffer keeps the arena mapped while it lives, even past its communicator.
#include <cstddef>
#include <memory>
#include <utility>

namespace cohort::comm {

namespace transport {
class ShmArena;
}

class SharedBuffer {
 public:
  SharedBuffer() = default;
  SharedBuffer(std::shared_ptr<transport::ShmArena> arena, void* data, size_t bytes)
      : arena_(std::move(arena)), data_(data), bytes_(bytes) {}
  SharedBuffer(SharedBuffer&& o) noexcept { swap(o); }
  SharedBuffer& operator=(SharedBuffer&& o) noexcept {
    SharedBuffer(std::move(o)).swap(*this);
    return *this;
  }
  ~SharedBuffer();

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  void swap(SharedBuffer& o) noexcept {
    std::swap(arena_, o.arena_);
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
  }
  std::shared_ptr<transport::ShmArena> arena_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace cohort::comm
