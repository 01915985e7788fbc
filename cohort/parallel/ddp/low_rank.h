#pragma once
// PowerSGD's linear algebra (Vogels et al., NeurIPS 2019) on row-major float32 matrices:
// which parameters it factorizes, at what rank, and the orthogonalization of P.
#include <cstdint>
#include <vector>

namespace cohort::parallel::low_rank {

struct MatrixPlan {
  int64_t rows = 0, cols = 0;  // the parameter seen as [d0, d1 * d2 * ...] (torch's view(n, -1))
  int rank = 0;                // min(requested rank, rows, cols); 0: sent uncompressed
};

// A 1-D (or scalar) parameter, or one whose factors would not be `min_rate` times smaller than
// itself (rows * cols < min_rate * (rows + cols) * rank), travels uncompressed (rank 0), as in
// PyTorch's powerSGD_hook.
MatrixPlan plan_matrix(const std::vector<int64_t>& shape, int rank, double min_rate);

// Makes the columns of a [rows, cols] matrix orthonormal in place (modified Gram-Schmidt, in
// column order). A zero column stays zero instead of turning into NaN; returns false when
// there was one (the caller redraws it: PowerSGD's Q must not lose a direction for good).
bool orthogonalize_columns(float* a, int64_t rows, int64_t cols);

}  // namespace cohort::parallel::low_rank
