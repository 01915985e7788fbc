#include "cohort/kernels/cuda/matmul.h"

#include <algorithm>
#include <memory>

#include "cohort/kernels/cuda/device_math.h"

// cuBLASLt's descriptors are created per call (host-only and cheap); the heuristic's algorithm,
// the expensive part, is cached per PlanKey. A row-major product is run as the column-major
// product of the transposes (matmul.h), which swaps the roles of a and b and of m and n.
namespace cohort::cuda {

void check_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw CublasError(detail::str("cuBLASLt: ", call, " failed at ", file, ":", line, ": ",
                                cublasLtGetStatusName(s), " (", cublasLtGetStatusString(s), ")"));
}

namespace {

constexpr unsigned kThreads = 256;

// ---- the epilogue on its own: for k == 0 and where cuBLASLt has no fused algorithm ----------

__device__ float to_f32(float x) {
  return x;
}
__device__ float to_f32(uint16_t x) {
  return math::f32_from_bf16(x);
}
__device__ void store(float* p, float v) {
  *p = v;
}
__device__ void store(uint16_t* p, float v) {
  *p = math::bf16_from_f32(v);
}

// c = act(scale * c + bias) over [m, n] with row stride ldc; scale 0 never reads c (which may
// hold garbage when beta is 0), bias may be null.
template <typename T>
__global__ void epilogue_kernel(T* c, int64_t ldc, int64_t m, int64_t n, float scale, const T* bias,
                                bool gelu) {
  const int64_t total = m * n;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = k / n, j = k - r * n;
    T* p = c + r * ldc + j;
    float v = scale == 0.f ? 0.f : scale * to_f32(*p);
    if (bias) v += to_f32(bias[j]);
    if (gelu) v = math::gelu_tanh(v);
    store(p, v);
  }
}

void launch_epilogue(const MatmulArgs& a, float scale, Epilogue epilogue, cudaStream_t stream) {
  const bool gelu = epilogue == Epilogue::kGeluTanhBias;
  const bool bias = epilogue != Epilogue::kNone;
  const unsigned blocks = blocks_for(a.m * a.n, kThreads);
  if (a.out == DType::kF32) {
    epilogue_kernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<float*>(a.c), a.ldc, a.m, a.n, scale,
        bias ? static_cast<const float*>(a.bias) : nullptr, gelu);
  } else {
    epilogue_kernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<uint16_t*>(a.c), a.ldc, a.m, a.n, scale,
        bias ? static_cast<const uint16_t*>(a.bias) : nullptr, gelu);
  }
  COHORT_CUDA_CHECK_LAUNCH("matmul epilogue");
}

// ---- cuBLASLt descriptors ---------------------------------------------------------------------

struct DescDeleter {
  void operator()(cublasLtMatmulDesc_t d) const { cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayout_t l) const { cublasLtMatrixLayoutDestroy(l); }
  void operator()(cublasLtMatmulPreference_t p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using OpDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

cudaDataType_t cuda_type(DType t) {
  return t == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
}

cublasOperation_t cuda_op(Trans t) {
  return t == Trans::kNo ? CUBLAS_OP_N : CUBLAS_OP_T;
}

template <typename V>
void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const V& v) {
  COHORT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}

// A stored row-major [rows, cols] matrix with row stride ld, seen column-major: cols x rows.
Layout row_major_layout(DType t, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  COHORT_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&l, cuda_type(t), uint64_t(cols), uint64_t(rows), ld));
  return Layout(l);
}

// The stored shape of op(x) [rows, cols]: x itself is [cols, rows] when transposed.
Layout operand_layout(DType t, const DeviceMatRef& x, int64_t rows, int64_t cols) {
  return x.trans == Trans::kNo ? row_major_layout(t, rows, cols, x.ld)
                               : row_major_layout(t, cols, rows, x.ld);
}

OpDesc op_desc(const MatmulArgs& a, Epilogue epilogue, bool allow_tf32) {
  const bool tf32 = allow_tf32 && a.in == DType::kF32;
  cublasLtMatmulDesc_t d = nullptr;
  COHORT_CUBLAS_CHECK(cublasLtMatmulDescCreate(
      &d, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  OpDesc desc(d);
  // Swapped operands: cuBLASLt's A is our b, its B our a.
  set_attr(d, CUBLASLT_MATMUL_DESC_TRANSA, cuda_op(a.b.trans));
  set_attr(d, CUBLASLT_MATMUL_DESC_TRANSB, cuda_op(a.a.trans));
  if (epilogue != Epilogue::kNone) {
    const cublasLtEpilogue_t e =
        epilogue == Epilogue::kBias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
    set_attr(d, CUBLASLT_MATMUL_DESC_EPILOGUE, e);
    set_attr(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, a.bias);
    set_attr(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(cuda_type(a.out)));
  }
  return desc;
}

// The largest power of two, up to 256, that divides the address: cuBLASLt's heuristic assumes
// 256-byte alignment unless told, and an algorithm chosen for it may fault on less.
int alignment(const void* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  int a = 256;
  while (a > 1 && u % unsigned(a) != 0) a /= 2;
  return a;
}

void validate(const MatmulArgs& a) {
  COHORT_CHECK_ARG(a.m >= 0 && a.n >= 0 && a.k >= 0, "cuda matmul: negative size m ", a.m, " n ",
                   a.n, " k ", a.k);
  const int64_t a_cols = a.a.trans == Trans::kNo ? a.k : a.m;
  const int64_t b_cols = a.b.trans == Trans::kNo ? a.n : a.k;
  COHORT_CHECK_ARG(a.ldc >= std::max<int64_t>(a.n, 1), "cuda matmul: ldc ", a.ldc, " < n ", a.n);
  if (a.m == 0 || a.n == 0) return;
  COHORT_CHECK_ARG(a.c, "cuda matmul: null output");
  COHORT_CHECK_ARG(a.epilogue == Epilogue::kNone || a.bias,
                   "cuda matmul: the epilogue needs a bias");
  if (a.k == 0) return;
  COHORT_CHECK_ARG(a.a.data && a.b.data, "cuda matmul: null operand");
  COHORT_CHECK_ARG(a.a.ld >= std::max<int64_t>(a_cols, 1), "cuda matmul: a's ld ", a.a.ld,
                   " < its ", a_cols, " columns");
  COHORT_CHECK_ARG(a.b.ld >= std::max<int64_t>(b_cols, 1), "cuda matmul: b's ld ", a.b.ld,
                   " < its ", b_cols, " columns");
}

MatmulHandle::PlanKey plan_key(const MatmulArgs& a, Epilogue e) {
  return {a.m,
          a.n,
          a.k,
          a.a.ld,
          a.b.ld,
          a.ldc,
          int(a.a.trans),
          int(a.b.trans),
          int(a.in),
          int(a.out),
          int(e),
          alignment(a.a.data),
          alignment(a.b.data),
          alignment(a.c)};
}

}  // namespace

MatmulHandle::MatmulHandle(cudaStream_t stream, MatmulOptions options)
    : stream_(stream), options_(options) {
  COHORT_CUDA_CHECK(cudaGetDevice(&device_));
  COHORT_CUBLAS_CHECK(cublasLtCreate(&handle_));
  if (options_.workspace_bytes) {
    const cudaError_t e = cudaMalloc(&workspace_, options_.workspace_bytes);
    if (e != cudaSuccess) cublasLtDestroy(handle_);
    COHORT_CUDA_CHECK(e);
  }
}

MatmulHandle::~MatmulHandle() {
  if (workspace_) cudaFree(workspace_);  // waits for the kernels still using it
  if (handle_) cublasLtDestroy(handle_);
}

bool MatmulHandle::find_algo(const PlanKey& key, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                             cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                             cublasLtMatmulAlgo_t* algo) {
  if (auto it = plans_.find(key); it != plans_.end()) {
    *algo = it->second.algo;
    return it->second.found;
  }
  cublasLtMatmulPreference_t p = nullptr;
  COHORT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p));
  Preference pref(p);
  const uint64_t ws = options_.workspace_bytes;
  COHORT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // cuBLASLt's A is our b and its B our a (swapped operands); C and D are both our c.
  const uint32_t align[4] = {uint32_t(std::get<12>(key)), uint32_t(std::get<11>(key)),
                             uint32_t(std::get<13>(key)), uint32_t(std::get<13>(key))};
  const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    COHORT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attrs[i], &align[i], 4));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(handle_, op, a, b, c, c, p, 1, &result, &returned);
  // NOT_SUPPORTED is the heuristic's "no algorithm": remembered, not thrown.
  if (s != CUBLAS_STATUS_NOT_SUPPORTED) COHORT_CUBLAS_CHECK(s);
  Plan plan;
  plan.found = s == CUBLAS_STATUS_SUCCESS && returned > 0;
  if (plan.found) plan.algo = result.algo;
  plans_.emplace(key, plan);
  *algo = plan.algo;
  return plan.found;
}

bool MatmulHandle::run_cublaslt(const MatmulArgs& args, Epilogue epilogue) {
  const OpDesc op = op_desc(args, epilogue, options_.allow_tf32);
  // cuBLASLt's A is our op(b) [k, n], its B our op(a) [m, k]; its D is our c, [m, n].
  const Layout lb = operand_layout(args.in, args.b, args.k, args.n);
  const Layout la = operand_layout(args.in, args.a, args.m, args.k);
  const Layout lc = row_major_layout(args.out, args.m, args.n, args.ldc);
  cublasLtMatmulAlgo_t algo{};
  if (!find_algo(plan_key(args, epilogue), op.get(), lb.get(), la.get(), lc.get(), &algo))
    return false;
  COHORT_CUBLAS_CHECK(cublasLtMatmul(
      handle_, op.get(), &args.alpha, args.b.data, lb.get(), args.a.data, la.get(), &args.beta,
      args.c, lc.get(), args.c, lc.get(), &algo, workspace_, options_.workspace_bytes, stream_));
  return true;
}

void MatmulHandle::matmul(const MatmulArgs& args) {
  validate(args);
  if (args.m == 0 || args.n == 0) return;
  int current = 0;
  COHORT_CUDA_CHECK(cudaGetDevice(&current));
  COHORT_CHECK_ARG(current == device_, "cuda matmul: the handle belongs to device ", device_,
                   " but device ", current, " is current");
  if (args.k == 0) {  // no product: c = epilogue(beta * c), as cpu::sgemm gives beta * c
    launch_epilogue(args, args.beta, args.epilogue, stream_);
    return;
  }
  if (run_cublaslt(args, args.epilogue)) return;
  COHORT_CHECK_T(args.epilogue != Epilogue::kNone, CublasError, "cuBLASLt: no algorithm for a ",
                 args.m, "x", args.k, "x", args.n, " matmul (input ", int(args.in), ", output ",
                 int(args.out), ")");
  ++epilogue_fallbacks_;
  if (!run_cublaslt(args, Epilogue::kNone))
    throw CublasError(detail::str("cuBLASLt: no algorithm for a ", args.m, "x", args.k, "x", args.n,
                                  " matmul without epilogue"));
  launch_epilogue(args, 1.f, args.epilogue, stream_);
}

void sgemm(MatmulHandle& h, int64_t m, int64_t n, int64_t k, float alpha, DeviceMatRef a,
           DeviceMatRef b, float beta, float* c, int64_t ldc) {
  MatmulArgs args;
  args.m = m, args.n = n, args.k = k;
  args.a = a, args.b = b;
  args.c = c, args.ldc = ldc;
  args.alpha = alpha, args.beta = beta;
  h.matmul(args);
}

}  // namespace cohort::cuda
