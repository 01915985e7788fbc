#pragma once
// Fused multi-tensor optimizer steps: one kernel launch updates a whole list of parameters
// (apex's multi_tensor_apply), instead of one launch per tensor, which for a model of many
// small tensors (biases, norms) would be all launch overhead. The per-element arithmetic is
// device_math.h's adamw_element and sgd_element, the float32 operations of optim/adamw.cc and
// optim/sgd.cc in their order; the scalars come from math::adamw_scalars / sgd_scalars, computed
// in double once per step as the CPU optimizers do.
//
// Layout: the tensors are cut into chunks of `chunk` elements and each thread block updates one
// chunk. The pointers, sizes and the block -> (tensor, chunk) map travel in the kernel's
// arguments (under CUDA's 4 KiB limit), so a step needs no host-to-device copy and no device
// scratch. A list too long for one argument block (kMaxTensors tensors or kMaxBlocks chunks) is
// split into several launches; plan_multi_tensor says how.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <vector>

#include "cohort/kernels/cuda/device_math.h"

namespace cohort::cuda {

// 64 Ki elements per block: enough work per block (256 KiB per array) to hide the launch, few
// enough blocks that one launch covers about 20 M elements.
inline constexpr int64_t kDefaultChunk = 65536;

// One parameter of an AdamW step: all four arrays of n float32 elements on the device.
struct AdamWTensor {
  float* param = nullptr;
  const float* grad = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  int64_t n = 0;
};

// One parameter of an SGD step; momentum_buffer may be null for SgdStep::kPlain.
struct SgdTensor {
  float* param = nullptr;
  const float* grad = nullptr;
  float* momentum_buffer = nullptr;
  int64_t n = 0;
};

// Every tensor of the list at the same step t (the scalars carry t); asynchronous on `stream`.
// A tensor with n == 0 is skipped. Throws InvalidArgument for a null array or chunk < 1,
// CudaError for a failed launch.
void adamw_multi_tensor(std::span<const AdamWTensor> tensors, const math::AdamScalars& s,
                        cudaStream_t stream, int64_t chunk = kDefaultChunk);
// `step` says which of optim/sgd.cc's loops every tensor runs (the caller tracks whether the
// momentum buffers exist yet, as the CPU optimizer does with its state slots).
void sgd_multi_tensor(std::span<const SgdTensor> tensors, const math::SgdScalars& s,
                      math::SgdStep step, bool nesterov, cudaStream_t stream,
                      int64_t chunk = kDefaultChunk);

// The launches a list of tensor sizes becomes; host code, public so tests check it anywhere.
namespace multi_tensor {

// Per launch at most kMaxBlocks blocks and max_tensors tensors (fewer for more arrays per
// tensor, to keep the arguments under 4 KiB).
inline constexpr int kMaxBlocks = 320;
inline constexpr int kMaxTensorsAdamW = 36;  // 4 arrays per tensor
inline constexpr int kMaxTensorsSgd = 48;    // 3 arrays per tensor

struct Block {
  int slot;       // index into Launch::tensors
  int64_t chunk;  // which chunk of that tensor
};
struct Launch {
  std::vector<int> tensors;  // indices into the caller's list
  std::vector<Block> blocks;
};

// Splits the tensors into chunks and the chunks into launches, in list order. A tensor whose
// chunks do not fit the current launch continues in the next one (in slot 0).
std::vector<Launch> plan(std::span<const int64_t> sizes, int max_tensors, int max_blocks,
                         int64_t chunk);

}  // namespace multi_tensor

}  // namespace cohort::cuda
