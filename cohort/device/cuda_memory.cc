#include "cohort/device/cuda_memory.h"

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cohort/device/cuda_kernels.h"
#include "cohort/device/pinned_uploads.h"
#include "cohort/kernels/cuda/strided_copy.h"
#include "cohort/tensor/allocator.h"
#include "cohort/tensor/block_cache.h"

namespace cohort::device {
namespace {

// Makes `index` the current device for the scope (CUDA's current device is per thread).
class DeviceScope {
 public:
  explicit DeviceScope(int index) {
    COHORT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != index) COHORT_CUDA_CHECK(cudaSetDevice(index));
  }
  ~DeviceScope() { cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

// One GPU: its cache, its statistics, its stream and its uploads' copy stream and staging
// buffers. `mu` guards cache and stats; `uploads` has its own lock.
struct Gpu {
  int index = 0;
  std::mutex mu;
  BlockCache cache{~uint64_t{0}};  // the whole GPU may be cached; freed on cudaMalloc failure
  DeviceMemoryStats stats;
  std::unique_ptr<cuda::Stream> stream;
  std::unique_ptr<PinnedUploads> uploads;
};

// An upload_async in flight: device_wait makes the GPU's stream wait for its copy. Its
// destructor does that too (and cannot throw), so a dropped upload still orders the reuse of its
// destination after the copy.
class CudaPendingUpload final : public PendingUpload {
 public:
  CudaPendingUpload(Gpu* gpu, PinnedUploads::Ticket ticket) : gpu_(gpu), ticket_(ticket) {}
  ~CudaPendingUpload() override {
    try {
      device_wait();
    } catch (const std::exception&) {  // a broken device: every later CUDA call reports it
    }
  }
  void device_wait() override {
    if (!gpu_) return;
    Gpu& g = *std::exchange(gpu_, nullptr);
    DeviceScope scope(g.index);
    g.uploads->make_wait(ticket_, g.stream->get());
  }

 private:
  Gpu* gpu_;  // null once waited for, or for an empty upload
  PinnedUploads::Ticket ticket_;
};

class CudaMemory final : public DeviceMemory {
 public:
  explicit CudaMemory(int count) {
    for (int i = 0; i < count; ++i) {
      auto g = std::make_unique<Gpu>();
      g->index = i;
      DeviceScope scope(i);
      g->stream = std::make_unique<cuda::Stream>();
      g->uploads = std::make_unique<PinnedUploads>();
      gpus_.push_back(std::move(g));
    }
  }

  void* allocate(int index, size_t nbytes, size_t* rounded) override {
    Gpu& g = gpu(index);
    const size_t size = CpuAllocator::round_size(nbytes);
    *rounded = size;
    std::lock_guard<std::mutex> lock(g.mu);
    void* p = g.cache.take(size);
    if (p) {
      g.stats.cache_hits++;
    } else {
      p = system_allocate(g, size);
      g.stats.system_allocs++;
    }
    g.stats.bytes_in_use += size;
    g.stats.bytes_cached = g.cache.bytes_cached();
    if (g.stats.bytes_in_use > g.stats.peak_bytes_in_use)
      g.stats.peak_bytes_in_use = g.stats.bytes_in_use;
    return p;
  }

  void deallocate(int index, void* p, size_t rounded) override {
    Gpu& g = gpu(index);
    std::lock_guard<std::mutex> lock(g.mu);
    g.cache.put(p, rounded);  // never refused: the cap is the whole GPU
    g.stats.bytes_in_use -= rounded;
    g.stats.bytes_cached = g.cache.bytes_cached();
  }

  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t nbytes) override {
    const int index = dst_device.is_cpu() ? src_device.index : dst_device.index;
    Gpu& g = gpu(index);
    DeviceScope scope(index);
    // On the GPU's stream, after every kernel queued there; synchronous for the caller.
    COHORT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, g.stream->get()));
    g.stream->synchronize();
  }

  void copy_view(int index, View view, void* dst, const void* src,
                 const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                 size_t elem_size) override {
    Gpu& g = gpu(index);
    DeviceScope scope(index);
    // On the GPU's stream, in order with the kernels that made src and will read dst.
    const int nd = int(shape.size());
    if (view == View::kSource)
      cuda::strided_copy(src, 0, shape.data(), strides.data(), nd, elem_size, dst, g.stream->get());
    else
      cuda::strided_scatter(src, shape.data(), strides.data(), nd, elem_size, dst, 0,
                            g.stream->get());
  }

  void zero(int index, void* p, size_t nbytes) override {
    Gpu& g = gpu(index);
    DeviceScope scope(index);
    COHORT_CUDA_CHECK(cudaMemsetAsync(p, 0, nbytes, g.stream->get()));
  }

  DeviceMemoryStats stats(int index) const override {
    Gpu& g = gpu(index);
    DeviceMemoryStats out;
    {
      std::lock_guard<std::mutex> lock(g.mu);
      out = g.stats;
    }
    out.pinned_allocs = g.uploads->pinned_allocs();
    return out;
  }

  // Staged through a page-locked buffer and copied on the GPU's copy stream (pinned_uploads.h).
  std::unique_ptr<PendingUpload> upload_async(int index, void* dst, const void* src,
                                              size_t nbytes) override {
    Gpu& g = gpu(index);
    if (nbytes == 0) return std::make_unique<CudaPendingUpload>(nullptr, PinnedUploads::Ticket{});
    DeviceScope scope(index);
    const PinnedUploads::Ticket t = g.uploads->start(dst, src, nbytes, g.stream->get());
    return std::make_unique<CudaPendingUpload>(&g, t);
  }

  cudaStream_t stream(int index) const { return gpu(index).stream->get(); }

  void empty_cache() {
    for (auto& g : gpus_) {
      std::lock_guard<std::mutex> lock(g->mu);
      release_cache(*g);
    }
  }

 private:
  Gpu& gpu(int index) const {
    COHORT_CHECK_ARG(index >= 0 && index < int(gpus_.size()), "device cuda:", index,
                     " does not exist: this process sees ", gpus_.size(), " GPU(s)",
                     " (CUDA_VISIBLE_DEVICES selects which)");
    return *gpus_[size_t(index)];
  }

  // Under g.mu. The stream is synchronised first: a cached block may still be in use by a
  // queued kernel, and cudaFree of it would wait anyway (it synchronises the device). An upload
  // into a cached block has finished by then: the stream waited for it before the block was freed.
  void release_cache(Gpu& g) {
    DeviceScope scope(g.index);
    g.stream->synchronize();
    g.cache.drain([](void* p, size_t) { cudaFree(p); });
    g.stats.bytes_cached = 0;
  }

  // Under g.mu: cudaMalloc, and once more after giving the cache back when the GPU is full.
  void* system_allocate(Gpu& g, size_t size) {
    DeviceScope scope(g.index);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation && g.cache.bytes_cached() > 0) {
      cudaGetLastError();
      release_cache(g);
      e = cudaMalloc(&p, size);
    }
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw cuda::CudaError(detail::str(
          "out of GPU memory on cuda:", g.index, ": allocating ", format_bytes(size), " with ",
          format_bytes(g.stats.bytes_in_use), " in use by cohort's tensors (peak ",
          format_bytes(g.stats.peak_bytes_in_use), "); lower the batch size or the model size"));
    }
    COHORT_CUDA_CHECK(e);
    return p;
  }

  std::vector<std::unique_ptr<Gpu>> gpus_;
};

struct Enabled {
  bool ok = false;
  std::string why;
  CudaMemory* memory = nullptr;  // lives until the process ends: tensors may outlive main()
};

const Enabled& enabled() {
  static const Enabled e = [] {
    Enabled r;
    const int count = cuda::device_count(&r.why);
    if (count == 0) {
      set_device_memory(Device::Kind::kCUDA, nullptr, r.why);
      return r;
    }
    r.memory = new CudaMemory(count);
    set_device_memory(Device::Kind::kCUDA, r.memory);
    dispatch::set_kernel_table(Device::Kind::kCUDA, &cuda_kernel_table());
    r.ok = true;
    return r;
  }();
  return e;
}

CudaMemory& memory() {
  const Enabled& e = enabled();
  COHORT_CHECK_ARG(e.ok, "CUDA is not available: ", e.why);
  return *e.memory;
}

}  // namespace

bool enable_cuda(std::string* why) {
  const Enabled& e = enabled();
  if (why) *why = e.why;
  return e.ok;
}

cudaStream_t cuda_stream(int index) {
  return memory().stream(index);
}

DeviceMemoryStats cuda_memory_stats(int index) {
  return memory().stats(index);
}

void cuda_empty_cache() {
  memory().empty_cache();
}

}  // namespace cohort::device
