#pragma once
// The CUDA runtime as cohort uses it: CUDA errors as cohort exceptions that name the call and
// CUDA's message; device discovery that never throws (a test or the trainer asks first and says
// why there is no GPU); RAII for streams, events, device arrays and pinned host buffers.
//
// Plain C++ may include this header (the CUDA runtime API is a C API); only kernels/cuda/*.cu
// are compiled by nvcc.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/error.h"

namespace cohort::cuda {

// A CUDA call failed: the message names the call, where it was made and CUDA's own words
// ("out of memory", "an illegal memory access was encountered").
class CudaError : public ErrorKind<CudaError, Error> {
 public:
  using ErrorKind::ErrorKind;
};

// Throws CudaError when `e` is not cudaSuccess.
void check(cudaError_t e, const char* call, const char* file, int line);
#define COHORT_CUDA_CHECK(call) ::cohort::cuda::check((call), #call, __FILE__, __LINE__)
// After a kernel launch: a bad launch configuration is reported by cudaGetLastError.
#define COHORT_CUDA_CHECK_LAUNCH(what) \
  ::cohort::cuda::check(cudaGetLastError(), what, __FILE__, __LINE__)

// Usable CUDA devices; 0 where there are none, with `why` set to CUDA's reason ("CUDA driver
// version is insufficient for CUDA runtime version" on a machine without a driver, "no
// CUDA-capable device is detected" without a GPU). Never throws.
int device_count(std::string* why = nullptr);

struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  size_t memory_bytes = 0;
};
DeviceInfo device_info(int device);

// A non-blocking stream (it does not synchronise with the legacy default stream).
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t stream);
  void synchronize() const;
  // Milliseconds from `start` to this event (both recorded and complete).
  float elapsed_ms_since(const Event& start) const;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// `n` elements of T in device memory (cudaMalloc; the caching allocator is tensor/'s, this is
// for kernels' tests and benchmarks). Copies are synchronous with the whole device: cudaMemcpy
// alone does not wait for kernels on a non-blocking stream (Stream's kind), and a download
// raced a cuBLASLt matmul that way under compute-sanitizer, where kernels run slowly.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    if (n_) COHORT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n_ * sizeof(T)));
  }
  explicit DeviceArray(std::span<const T> host) : DeviceArray(host.size()) { upload(host); }
  ~DeviceArray() {
    if (p_) cudaFree(p_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  void upload(std::span<const T> host) {
    COHORT_CHECK_ARG(host.size() == n_, "DeviceArray: upload of ", host.size(), " elements into ",
                     n_);
    if (!n_) return;
    COHORT_CUDA_CHECK(cudaDeviceSynchronize());  // no kernel still reads the old contents
    COHORT_CUDA_CHECK(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    COHORT_CUDA_CHECK(cudaDeviceSynchronize());  // landed before any stream's next kernel
  }
  std::vector<T> download() const {
    std::vector<T> out(n_);
    if (!n_) return out;
    COHORT_CUDA_CHECK(cudaDeviceSynchronize());  // every kernel that writes it has finished
    COHORT_CUDA_CHECK(cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// Page-locked host memory: copies from and to it run asynchronously on a stream, overlapped
// with kernels (the loader's next batch while the current step computes).
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* data() { return p_; }
  size_t size() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Blocks of `threads` threads enough to cover `n` items, capped at what a grid may hold; the
// kernels loop with a grid stride, so a capped grid still covers every item.
inline unsigned blocks_for(int64_t n, unsigned threads) {
  const int64_t b = (n + threads - 1) / threads;
  return unsigned(b < 1 ? 1 : (b > (int64_t{1} << 30) ? (int64_t{1} << 30) : b));
}

}  // namespace cohort::cuda
