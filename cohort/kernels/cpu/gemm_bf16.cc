// gemm_bf16: sgemm on bf16-rounded copies of its operands (kernels/cpu/gemm.h).
#include <vector>

#include "cohort/core/dtype.h"
#include "cohort/kernels/cpu/gemm.h"

namespace cohort::cpu {
namespace {

// The stored [rows, cols] matrix of `r` (row stride r.ld), each element rounded to bf16, in a
// buffer with the same row stride so the gemm reads it as it would have read `r`.
std::vector<float> rounded(MatRef r, int64_t rows, int64_t cols) {
  std::vector<float> out(size_t(rows > 0 ? (rows - 1) * r.ld + cols : 0));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[size_t(i * r.ld + j)] = bf16_to_float(float_to_bf16(r.data[i * r.ld + j]));
  return out;
}

}  // namespace

void gemm_bf16(int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b, float beta,
               float* c, int64_t ldc) {
  if (k == 0 || m == 0 || n == 0) return sgemm(m, n, k, alpha, a, b, beta, c, ldc);
  // op(a) is [m, k]: stored [m, k], or [k, m] when transposed; likewise op(b) [k, n].
  const bool at = a.trans == Trans::kYes, bt = b.trans == Trans::kYes;
  const std::vector<float> ra = rounded(a, at ? k : m, at ? m : k);
  const std::vector<float> rb = rounded(b, bt ? n : k, bt ? k : n);
  sgemm(m, n, k, alpha, {ra.data(), a.ld, a.trans}, {rb.data(), b.ld, b.trans}, beta, c, ldc);
}

}  // namespace cohort::cpu
