#pragma once
// CUDA tensors: the caching allocator and copies behind Tensor on Device::cuda(i) (registered
// with tensor/device_memory.h), and the one stream per GPU that cohort's kernels run on.
//
// The cache: freed blocks are kept by size class (tensor/block_cache.h) and handed out again,
// so a training step, which allocates the same sizes every time, calls cudaMalloc only in its
// first step. Blocks are reused in stream order: everything on a GPU runs on its one stream
// (cuda_stream()), so a block freed after a kernel was queued may be reused by the next kernel
// on the same stream without waiting (PyTorch's caching allocator relies on the same order).
// When cudaMalloc fails, the cache is given back to CUDA and the allocation tried once more.
//
// Uploads (DeviceMemory::upload_async, pinned_uploads.h) are the one thing on another stream: a
// copy stream per GPU, fed from reused page-locked buffers. Their destinations rejoin the compute
// stream's order before they can be freed (the compute stream waits for the copy's event), so
// the cache's rule above still holds for every block in it.
#include <string>

#include "cohort/kernels/cuda/runtime.h"
#include "cohort/tensor/device_memory.h"

namespace cohort::device {

// Registers CUDA's memory (tensor/device_memory.h) and kernels (dispatch/kernel_table.h) for
// every visible GPU, once; later calls return the first answer. False, with `why` set (CUDA's
// reason: no driver, no device), where no GPU is usable: tensors on Device::cuda(i) then fail with
// that reason.
bool enable_cuda(std::string* why = nullptr);

// The stream cohort's kernels and copies run on for GPU `index` (enable_cuda() first).
cudaStream_t cuda_stream(int index);

// The statistics of GPU `index`'s cache (system_allocs counts cudaMalloc calls, pinned_allocs
// the page-locked staging buffers made for uploads).
DeviceMemoryStats cuda_memory_stats(int index);

// Gives every cached block of every GPU back to CUDA (cudaFree).
void cuda_empty_cache();

}  // namespace cohort::device
