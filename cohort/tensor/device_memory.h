#pragma once
// The memory of a device other than the CPU, as tensor/ sees it. tensor/ has no CUDA of its
// own: a device backend registers itself once per device kind (device/cuda_memory.h for CUDA:
// its caching allocator and copies), and Storage and Tensor::to ask it for blocks and copies.
// Where none is registered (a build without CUDA, a machine without a GPU, or a program that
// did not enable it), asking for a tensor on that device is an InvalidArgument that says why,
// never a crash.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cohort/tensor/dtype.h"

namespace cohort {

struct DeviceMemoryStats {
  uint64_t system_allocs = 0;  // blocks from the device's own allocator (cudaMalloc)
  uint64_t cache_hits = 0;     // blocks served from the cache
  uint64_t bytes_in_use = 0;   // handed out, not yet returned
  uint64_t bytes_cached = 0;   // returned, kept for reuse
  uint64_t peak_bytes_in_use = 0;
  // Page-locked host buffers made to stage upload_async (cudaMallocHost); kept and reused.
  uint64_t pinned_allocs = 0;
};

// An upload started by DeviceMemory::upload_async whose copy may still be running.
class PendingUpload {
 public:
  // Does what device_wait() does when it was not called: the destination may be freed after.
  virtual ~PendingUpload() = default;
  // The device's work queued from now on (kernels, copies, and so the reuse of freed blocks)
  // runs after the copy. The host does not wait: on CUDA the compute stream waits for the copy's
  // event. Call it before queueing the first kernel that reads the destination; again: no-op.
  virtual void device_wait() = 0;
};

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // A block of at least `nbytes` on device `index`; `*rounded` is the size it counts as.
  // Throws (the backend's error type, a cohort::Error) when the device is out of memory.
  virtual void* allocate(int index, size_t nbytes, size_t* rounded) = 0;
  virtual void deallocate(int index, void* p, size_t rounded) = 0;
  // Copies `nbytes` between host and device or within the device; when it returns, the copy
  // is complete and both buffers may be reused.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t nbytes) = 0;
  // A copy on device `index` between a strided view (shape, strides in elements, starting at its
  // pointer) and a contiguous buffer, elements of `elem_size` bytes in row-major order. kSource:
  // the view is src and dst is contiguous (what makes a transposed or sliced tensor contiguous);
  // kDestination: the view is dst (a slice's backward writes into its window).
  enum class View : uint8_t { kSource, kDestination };
  virtual void copy_view(int index, View view, void* dst, const void* src,
                         const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                         size_t elem_size) = 0;
  // Sets `nbytes` at `p` on device `index` to zero bytes, in order with the device's kernels
  // (zeros() and fill_(0) on a device: the host cannot write device memory).
  virtual void zero(int index, void* p, size_t nbytes) = 0;
  virtual DeviceMemoryStats stats(int index) const = 0;
  // Starts copying `nbytes` from host memory `src` to device memory `dst` on device `index` and
  // returns before the copy is done, so that it overlaps the kernels running: the trainer's next
  // batch is copied while the current step computes (copy() makes the caller wait for every
  // copy; only the caller knows when the bytes are needed, so that is when it waits). `src` may be
  // reused once this returns (the backend stages it). `dst` must not be read by kernels before
  // the handle's device_wait() and must stay allocated until the handle is gone: destroy the
  // handle before freeing dst. (A backend without asynchronous copies may copy() and return a
  // handle with nothing to wait for.)
  virtual std::unique_ptr<PendingUpload> upload_async(int index, void* dst, const void* src,
                                                      size_t nbytes) = 0;
};

// Registers the backend of one device kind (not kCPU); null unregisters it. The backend must
// outlive every tensor on its devices. `unavailable_why`, with a null backend, is what the
// error for a tensor on that device says ("no CUDA-capable device is detected").
void set_device_memory(Device::Kind kind, DeviceMemory* memory,
                       const std::string& unavailable_why = "");

// The backend of `device`'s kind; InvalidArgument naming the device and why it is unavailable.
DeviceMemory& device_memory(Device device);

}  // namespace cohort
