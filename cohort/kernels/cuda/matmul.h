#pragma once
// Matrix multiply on the GPU through cuBLASLt: the counterpart of kernels/cpu/gemm.h's sgemm,
// with row-major operands described the same way (a stored matrix, its row stride, and whether
// the product uses its transpose), plus bf16 inputs and fused bias / GELU epilogues.
//
//   c [m, n] = epilogue(alpha * op(a) [m, k] * op(b) [k, n] + beta * c)
//
// cuBLASLt is column-major; a row-major matrix read as column-major is its transpose, so the
// call computes c^T = op(b)^T op(a)^T with the operands swapped and no data moved.
//
// GELU: cuBLASLt's GELU epilogue is the tanh approximation,
//   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))     (torch's gelu(approximate="tanh")),
// not cohort's exact x Phi(x) (kernels/cpu, math::gelu). The two differ by up to 4.7e-4
// absolute (at x = -2.7); a model trained with exact GELU on the CPU sees that difference when
// it runs this epilogue. math::gelu_tanh is the host and device formula the tests compare with.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "cohort/kernels/cuda/runtime.h"

namespace cohort::cuda {

// A cuBLASLt call failed: the message names the call, where it was made and cuBLAS's status
// ("CUBLAS_STATUS_NOT_SUPPORTED"). A CudaError, so callers catch GPU failures in one place.
class CublasError : public ErrorKind<CublasError, CudaError> {
 public:
  using ErrorKind::ErrorKind;
};

// Throws CublasError when `s` is not CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t s, const char* call, const char* file, int line);
#define COHORT_CUBLAS_CHECK(call) ::cohort::cuda::check_cublas((call), #call, __FILE__, __LINE__)

enum class Trans : uint8_t { kNo, kYes };    // cpu::Trans
enum class DType : uint8_t { kF32, kBF16 };  // bf16: uint16_t bit patterns (math::bf16_from_f32)

// A stored row-major matrix on the device, as cpu::MatRef: element (i, j) at data[i * ld + j]
// (in elements of the matmul's input type); trans = kYes means the product uses its transpose.
struct DeviceMatRef {
  const void* data = nullptr;
  int64_t ld = 0;
  Trans trans = Trans::kNo;
};

enum class Epilogue : uint8_t {
  kNone,
  kBias,          // + bias [n] on every row (a bias per output column)
  kGeluTanhBias,  // gelu_tanh(... + bias): CUBLASLT_EPILOGUE_GELU_BIAS (see above)
};

struct MatmulArgs {
  int64_t m = 0, n = 0, k = 0;
  DeviceMatRef a, b;
  DType in = DType::kF32;  // a and b
  void* c = nullptr;       // [m, n], row stride ldc, of type `out`; read only when beta != 0
  int64_t ldc = 0;
  DType out = DType::kF32;
  float alpha = 1.f, beta = 0.f;
  Epilogue epilogue = Epilogue::kNone;
  const void* bias = nullptr;  // [n] of type `out`, where the epilogue adds one
};

struct MatmulOptions {
  // cuBLASLt's scratch space, allocated once: NVIDIA recommends 32 MiB on Hopper. Algorithms
  // that need more are not considered.
  size_t workspace_bytes = size_t{32} << 20;
  // f32 products on tensor cores with 10-bit mantissas (about 1e-3 relative): faster, but no
  // longer comparable with the CPU's sgemm to 1e-4, so off by default.
  bool allow_tf32 = false;
};

// A cuBLASLt handle with its workspace, bound to one stream on the device current at
// construction: every matmul runs on that stream and uses the one workspace, so no call
// allocates. Two streams need two handles (a shared workspace would race). The algorithm
// cuBLASLt's heuristic picks is cached per shape, so a training loop queries it once.
class MatmulHandle {
 public:
  explicit MatmulHandle(cudaStream_t stream, MatmulOptions options = {});
  ~MatmulHandle();
  MatmulHandle(const MatmulHandle&) = delete;
  MatmulHandle& operator=(const MatmulHandle&) = delete;

  // Asynchronous on stream(). Throws InvalidArgument for a bad shape or stride, CublasError
  // when cuBLASLt fails.
  void matmul(const MatmulArgs& args);

  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }
  const MatmulOptions& options() const { return options_; }
  // Matmuls whose epilogue cuBLASLt had no algorithm for, so a separate kernel applied it
  // after a plain matmul (the same result up to one more rounding for a bf16 output).
  int64_t epilogue_fallbacks() const { return epilogue_fallbacks_; }

  // Everything the heuristic's choice depends on (shapes, strides, types, epilogue and the
  // pointers' alignments); public for the implementation's helpers, not for callers.
  using PlanKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int,
                             int, int, int, int, int>;

 private:
  bool find_algo(const PlanKey& key, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                 cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatmulAlgo_t* algo);
  bool run_cublaslt(const MatmulArgs& args, Epilogue epilogue);

  cudaStream_t stream_ = nullptr;
  int device_ = 0;
  MatmulOptions options_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  int64_t epilogue_fallbacks_ = 0;
  // A key maps to the algorithm, or to "none" (found = false) so a missing fused epilogue is
  // not asked for again on every call.
  struct Plan {
    bool found = false;
    cublasLtMatmulAlgo_t algo{};
  };
  std::map<PlanKey, Plan> plans_;
};

// cpu::sgemm on the device: float32 c [m, n] = alpha * op(a) op(b) + beta * c.
void sgemm(MatmulHandle& h, int64_t m, int64_t n, int64_t k, float alpha, DeviceMatRef a,
           DeviceMatRef b, float beta, float* c, int64_t ldc);

}  // namespace cohort::cuda
