#pragma once
// The CUDA kernel table (dispatch/kernel_table.h): kernels/cuda behind the entry points ops/
// runs, each on the stream of the tensors' GPU (cuda_memory.h). Registered by enable_cuda()
// together with CUDA's memory; an entry without a CUDA kernel yet is null, and its op says so
// (docs/gpu.md).
#include "cohort/dispatch/kernel_table.h"

namespace cohort::device {

const dispatch::KernelTable& cuda_kernel_table();

}  // namespace cohort::device
