#pragma once
// Single-precision GEMM through OpenBLAS (row-major), plus the bias helpers that go with it.
//
// Threads: OpenBLAS keeps its own thread count. sgemm() first brings it in line with
// cohort::num_threads(), so set_num_threads(1) makes every gemm single-threaded too. A gemm
// issued from inside a parallel_for body (one per batch element) must not fan out again: make a
// SerialBlasScope outside the parallel_for and call sgemm_unsynced() inside it.
#include <cstdint>

namespace cohort::cpu {

enum class Trans : uint8_t { kNo, kYes };

// A stored row-major matrix: element (i, j) is data[i * ld + j]. trans = kYes means the gemm
// uses its transpose.
struct MatRef {
  const float* data = nullptr;
  int64_t ld = 0;
  Trans trans = Trans::kNo;
};

// Makes OpenBLAS use n threads (n <= 0: cohort::num_threads()). Calls openblas_set_num_threads
// only when the count differs. Not to be called from inside parallel_for.
void set_blas_threads(int n);

// Sets OpenBLAS to one thread for its lifetime, for gemms issued from parallel_for bodies. The
// next sgemm() after it restores the pool's count.
class SerialBlasScope {
 public:
  SerialBlasScope() { set_blas_threads(1); }
  SerialBlasScope(const SerialBlasScope&) = delete;
  SerialBlasScope& operator=(const SerialBlasScope&) = delete;
};

// c [m, n] = alpha * op(a) [m, k] * op(b) [k, n] + beta * c   (c row stride ldc).
// k == 0 gives beta * c; beta == 0 never reads c. Syncs OpenBLAS's thread count first.
void sgemm(int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b, float beta, float* c,
           int64_t ldc);
// The same without touching the thread count: for use inside a SerialBlasScope.
void sgemm_unsynced(int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b, float beta,
                    float* c, int64_t ldc);

// sgemm with a and b rounded to bf16 first (to nearest, ties to even), the products and sums
// in f32 and c f32: what a GPU's bf16 tensor-core gemm with f32 accumulation computes, up to
// the order of the sums. train.precision = "bf16" on the CPU (ops/matmul.cc); the rounded
// copies are made per call, so it is slower than sgemm, not faster.
void gemm_bf16(int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b, float beta,
               float* c, int64_t ldc);

// y [rows, cols]: every row = bias [cols] (pre-fill before a beta = 1 gemm).
void fill_rows(float* y, const float* bias, int64_t rows, int64_t cols);
// out [cols] = sum over rows of g [rows, cols] (column sums; the bias gradient), in row order.
void sum_rows(const float* g, int64_t rows, int64_t cols, float* out);

}  // namespace cohort::cpu
