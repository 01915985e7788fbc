#include "cohort/kernels/cuda/runtime.h"

namespace cohort::cuda {

void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky-free error so the next call starts clean
  throw CudaError(detail::str("CUDA: ", call, " failed at ", file, ":", line, ": ",
                              cudaGetErrorString(e), " (", cudaGetErrorName(e), ")"));
}

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA-capable device is detected";
  return n;
}

DeviceInfo device_info(int device) {
  cudaDeviceProp p{};
  COHORT_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return {p.name, p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem};
}

Stream::Stream() {
  COHORT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}
Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}
void Stream::synchronize() const {
  COHORT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

Event::Event() {
  COHORT_CUDA_CHECK(cudaEventCreate(&event_));
}
Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}
void Event::record(cudaStream_t stream) {
  COHORT_CUDA_CHECK(cudaEventRecord(event_, stream));
}
void Event::synchronize() const {
  COHORT_CUDA_CHECK(cudaEventSynchronize(event_));
}
float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  COHORT_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes_) COHORT_CUDA_CHECK(cudaMallocHost(&p_, bytes_));
}
PinnedBuffer::~PinnedBuffer() {
  if (p_) cudaFreeHost(p_);
}

}  // namespace cohort::cuda
