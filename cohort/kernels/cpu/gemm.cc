#include "cohort/kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "cohort/core/error.h"
#include "cohort/core/thread_pool.h"
#include "cohort/kernels/cpu/simd.h"

namespace cohort::cpu {

void set_blas_threads(int n) {
  if (n <= 0) n = num_threads();
  // openblas_get_num_threads is a plain read; comparing with it (rather than a cached value)
  // stays right even if the application sets OpenBLAS's count itself.
  if (openblas_get_num_threads() != n) openblas_set_num_threads(n);
}

void sgemm(int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b, float beta, float* c,
           int64_t ldc) {
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
