#include "cohort/kernels/cuda/optim.h"

#include <array>

#include "cohort/kernels/cuda/runtime.h"

// The multi-tensor kernel: block b looks up its (tensor, chunk) in the arguments and runs the
// optimizer's element function over that chunk with a block stride. Which optimizer is a
// functor (AdamWOp, SgdOp) holding the step's scalars.
namespace cohort::cuda {

namespace multi_tensor {

std::vector<Launch> plan(std::span<const int64_t> sizes, int max_tensors, int max_blocks,
                         int64_t chunk) {
  COHORT_CHECK_ARG(chunk >= 1 && max_tensors >= 1 && max_blocks >= 1, "multi_tensor::plan: chunk ",
                   chunk, ", max_tensors ", max_tensors, ", max_blocks ", max_blocks);
  std::vector<Launch> out;
  Launch cur;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t chunks = (sizes[i] + chunk - 1) / chunk;
    for (int64_t c = 0; c < chunks; ++c) {
      if (cur.tensors.empty() || cur.tensors.back() != int(i)) {
        if (int(cur.tensors.size()) == max_tensors) out.push_back(std::move(cur)), cur = {};
        cur.tensors.push_back(int(i));
      }
      cur.blocks.push_back({int(cur.tensors.size()) - 1, c});
      // Full: the rest of this tensor's chunks start the next launch, in its slot 0.
      if (int(cur.blocks.size()) == max_blocks) out.push_back(std::move(cur)), cur = {};
    }
  }
  if (!cur.blocks.empty()) out.push_back(std::move(cur));
  return out;
}

}  // namespace multi_tensor

namespace {

constexpr unsigned kThreads = 512;
constexpr int kMaxBlocks = multi_tensor::kMaxBlocks;

// The kernel's argument block: Depth arrays per tensor for up to MaxTensors tensors, and each
// block's slot and chunk. Passed by value, so it lives in the constant bank with no copy.
template <int Depth, int MaxTensors>
struct ChunkArgs {
  void* ptrs[Depth][MaxTensors];
  int64_t sizes[MaxTensors];
  int64_t chunk;
  int32_t block_chunk[kMaxBlocks];
  uint8_t block_slot[kMaxBlocks];
};
// CUDA's classic limit on kernel arguments is 4 KiB; leave room for the functor's scalars.
static_assert(sizeof(ChunkArgs<4, multi_tensor::kMaxTensorsAdamW>) <= 3584);
static_assert(sizeof(ChunkArgs<3, multi_tensor::kMaxTensorsSgd>) <= 3584);
static_assert(multi_tensor::kMaxTensorsSgd <= 256, "block_slot is a uint8_t");

template <int Depth, int MaxTensors, typename Op>
__global__ void __launch_bounds__(kThreads)
    multi_tensor_kernel(ChunkArgs<Depth, MaxTensors> args, Op op) {
  const int slot = args.block_slot[blockIdx.x];
  const int64_t start = int64_t(args.block_chunk[blockIdx.x]) * args.chunk;
  const int64_t size = args.sizes[slot];
  const int64_t end = start + args.chunk < size ? start + args.chunk : size;
  void* ptrs[Depth];
#pragma unroll
  for (int d = 0; d < Depth; ++d) ptrs[d] = args.ptrs[d][slot];
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) op(ptrs, i);
}

struct AdamWOp {
  math::AdamScalars s;
  __device__ void operator()(void* const* t, int64_t i) const {
    math::adamw_element(static_cast<float*>(t[0])[i], static_cast<const float*>(t[1])[i],
                        static_cast<float*>(t[2])[i], static_cast<float*>(t[3])[i], s);
  }
};

struct SgdOp {
  math::SgdScalars s;
  math::SgdStep step;
  bool nesterov;
  __device__ void operator()(void* const* t, int64_t i) const {
    float unused = 0.f;  // kPlain never touches the buffer, which may be null
    float* buf = static_cast<float*>(t[2]);
    math::sgd_element(static_cast<float*>(t[0])[i], static_cast<const float*>(t[1])[i],
                      buf ? buf[i] : unused, s, step, nesterov);
  }
};

// Plans the list and launches one kernel per planned launch. `arrays(t)` gives tensor t's Depth
// device pointers.
template <int Depth, int MaxTensors, typename Tensor, typename Op, typename Arrays>
void launch_all(std::span<const Tensor> tensors, Op op, int64_t chunk, cudaStream_t stream,
                Arrays arrays, const char* what) {
  std::vector<int64_t> sizes(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) sizes[i] = tensors[i].n;
  for (const multi_tensor::Launch& l : multi_tensor::plan(sizes, MaxTensors, kMaxBlocks, chunk)) {
    ChunkArgs<Depth, MaxTensors> args{};
    args.chunk = chunk;
    for (size_t s = 0; s < l.tensors.size(); ++s) {
      const std::array<void*, Depth> p = arrays(tensors[l.tensors[s]]);
      for (int d = 0; d < Depth; ++d) args.ptrs[d][s] = p[d];
      args.sizes[s] = sizes[l.tensors[s]];
    }
    for (size_t b = 0; b < l.blocks.size(); ++b) {
      args.block_slot[b] = uint8_t(l.blocks[b].slot);
      args.block_chunk[b] = int32_t(l.blocks[b].chunk);
    }
    multi_tensor_kernel<<<unsigned(l.blocks.size()), kThreads, 0, stream>>>(args, op);
    COHORT_CUDA_CHECK_LAUNCH(what);
  }
}

void check_chunk(int64_t chunk, int64_t n, const char* what) {
  COHORT_CHECK_ARG(chunk >= 1, what, ": chunk ", chunk, " < 1");
  // block_chunk is an int32: a tensor may span at most 2^31 chunks.
  COHORT_CHECK_ARG((n + chunk - 1) / chunk <= INT32_MAX, what, ": a tensor of ", n,
                   " elements is too many chunks of ", chunk);
}

}  // namespace

void adamw_multi_tensor(std::span<const AdamWTensor> tensors, const math::AdamScalars& s,
                        cudaStream_t stream, int64_t chunk) {
  for (const AdamWTensor& t : tensors) {
    check_chunk(chunk, t.n, "adamw_multi_tensor");
    COHORT_CHECK_ARG(t.n == 0 || (t.param && t.grad && t.exp_avg && t.exp_avg_sq),
                     "adamw_multi_tensor: a null array for a tensor of ", t.n, " elements");
  }
  auto arrays = [](const AdamWTensor& t) {
    return std::array<void*, 4>{t.param, const_cast<float*>(t.grad), t.exp_avg, t.exp_avg_sq};
  };
  launch_all<4, multi_tensor::kMaxTensorsAdamW>(tensors, AdamWOp{s}, chunk, stream, arrays,
                                                "adamw_multi_tensor");
}

void sgd_multi_tensor(std::span<const SgdTensor> tensors, const math::SgdScalars& s,
                      math::SgdStep step, bool nesterov, cudaStream_t stream, int64_t chunk) {
  const bool needs_buffer = step != math::SgdStep::kPlain;
  for (const SgdTensor& t : tensors) {
    check_chunk(chunk, t.n, "sgd_multi_tensor");
    COHORT_CHECK_ARG(t.n == 0 || (t.param && t.grad && (t.momentum_buffer || !needs_buffer)),
                     "sgd_multi_tensor: a null array for a tensor of ", t.n, " elements");
  }
  auto arrays = [](const SgdTensor& t) {
    return std::array<void*, 3>{t.param, const_cast<float*>(t.grad), t.momentum_buffer};
  };
  launch_all<3, multi_tensor::kMaxTensorsSgd>(tensors, SgdOp{s, step, nesterov}, chunk, stream,
                                              arrays, "sgd_multi_tensor");
}

}  // namespace cohort::cuda
