#include "cohort/kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "cohort/core/error.h"
#include "cohort/core/thread_pool.h"
#include "cohort/kernels/cpu/simd.h"

// oneDNN's sgemm, when the build found it (Debian's libdnnl-dev), serves the pool-level calls:
// it picks AVX-512 kernels on CPUs that have them, where Debian's OpenBLAS 0.3.21 stops at
// AVX2 on recent AMD parts (about 2x on the MLP's matmuls; see docs/benchmarks.md). OpenBLAS
// stays for calls made inside parallel_for bodies, which must not start threads of their own.
#ifdef COHORT_HAVE_DNNL
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#endif

namespace cohort::cpu {

void set_blas_threads(int n) {
  if (n <= 0) n = num_threads();
  // openblas_get_num_threads is a plain read; comparing with it (rather than a cached value)
  // stays right even if the application sets OpenBLAS's count itself.
  if (openblas_get_num_threads() != n) openblas_set_num_threads(n);
}

namespace {
#ifdef COHORT_HAVE_DNNL
// One single-threaded oneDNN call. oneDNN runs on OpenMP; its worker threads spin after each
// call and starve cohort's own pool on a small machine (the CNN ran 3x slower), so every
// calling thread caps OpenMP at 1 and cohort splits the rows of C over its pool instead.
bool dnnl_block(int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b, float beta,
                float* c, int64_t ldc) {
  thread_local bool capped = false;
  if (!capped) omp_set_num_threads(1), capped = true;
  return dnnl_sgemm(a.trans == Trans::kYes ? 'T' : 'N', b.trans == Trans::kYes ? 'T' : 'N', m, n, k,
                    alpha, a.data, a.ld, b.data, b.ld, beta, c, ldc) == dnnl_success;
}

// C rows [lo, hi) need rows [lo, hi) of op(A): row offsets of A, or column offsets when A is
// transposed. B is shared.
bool dnnl_sgemm_ok(int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b, float beta,
                   float* c, int64_t ldc) {
  const int64_t kMinRows = 16;
  int64_t blocks = std::min<int64_t>(num_threads(), m / kMinRows);
  if (blocks <= 1) return dnnl_block(m, n, k, alpha, a, b, beta, c, ldc);
  std::atomic<bool> ok{true};
  parallel_for(0, m, (m + blocks - 1) / blocks, [&](int64_t lo, int64_t hi) {
    MatRef rows = a;
    rows.data = a.data + (a.trans == Trans::kYes ? lo : lo * a.ld);
    if (!dnnl_block(hi - lo, n, k, alpha, rows, b, beta, c + lo * ldc, ldc)) ok = false;
  });
  // Some blocks may already hold their result, so OpenBLAS cannot redo C from here.
  COHORT_INTERNAL(ok.load(), "oneDNN sgemm rejected m ", m, " n ", n, " k ", k, " lda ", a.ld,
                  " ldb ", b.ld, " ldc ", ldc);
  return true;
}
#else
bool dnnl_sgemm_ok(int64_t, int64_t, int64_t, float, MatRef, MatRef, float, float*, int64_t) {
  return false;
}
#endif
}  // namespace

void sgemm(int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b, float beta, float* c,
           int64_t ldc) {
  if (m > 0 && n > 0 && k > 0 && dnnl_sgemm_ok(m, n, k, alpha, a, b, beta, c, ldc)) return;
  set_blas_threads(0);
  sgemm_unsynced(m, n, k, alpha, a, b, beta, c, ldc);
}

void sgemm_unsynced(int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b, float beta,
                    float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // OpenBLAS's behaviour for k = 0 is not documented: do it here
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      if (beta == 0.0f) {
        std::memset(row, 0, size_t(n) * sizeof(float));
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] *= beta;
      }
    }
    return;
  }
  // cblas rejects (prints and skips) a leading dimension below the stored row length.
  const int64_t a_cols = a.trans == Trans::kNo ? k : m;
  const int64_t b_cols = b.trans == Trans::kNo ? n : k;
  COHORT_INTERNAL(
      a.ld >= std::max<int64_t>(1, a_cols) && b.ld >= std::max<int64_t>(1, b_cols) && ldc >= n,
      "sgemm: leading dimensions lda ", a.ld, " ldb ", b.ld, " ldc ", ldc, " too small for m ", m,
      " n ", n, " k ", k);
  cblas_sgemm(CblasRowMajor, a.trans == Trans::kYes ? CblasTrans : CblasNoTrans,
              b.trans == Trans::kYes ? CblasTrans : CblasNoTrans, blasint(m), blasint(n),
              blasint(k), alpha, a.data, blasint(a.ld), b.data, blasint(b.ld), beta, c,
              blasint(ldc));
}

void fill_rows(float* y, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) std::memcpy(y + r * cols, bias, size_t(cols) * sizeof(float));
}

namespace {
COHORT_SIMD_CLONES void add_row(float* __restrict out, const float* __restrict g, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] += g[j];
}
}  // namespace

void sum_rows(const float* g, int64_t rows, int64_t cols, float* out) {
  // Columns split across threads; each column is summed in row order, so the result does not
  // depend on the thread count.
  parallel_for(0, cols, std::max<int64_t>(64, (1 << 16) / std::max<int64_t>(rows, 1)),
               [&](int64_t lo, int64_t hi) {
                 std::memset(out + lo, 0, size_t(hi - lo) * sizeof(float));
                 for (int64_t r = 0; r < rows; ++r) add_row(out + lo, g + r * cols + lo, hi - lo);
               });
}

}  // namespace cohort::cpu
