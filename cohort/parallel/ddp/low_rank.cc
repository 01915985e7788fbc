#include "cohort/parallel/ddp/low_rank.h"

#include <algorithm>
#include <cmath>

namespace cohort::parallel::low_rank {

MatrixPlan plan_matrix(const std::vector<int64_t>& shape, int rank, double min_rate) {
  if (shape.size() < 2) return {};
  MatrixPlan p{.rows = shape[0], .cols = 1};
  for (size_t i = 1; i < shape.size(); ++i) p.cols *= shape[i];
  int r = int(std::min<int64_t>({int64_t(rank), p.rows, p.cols}));
  double dense = double(p.rows) * double(p.cols);
  double factors = double(p.rows + p.cols) * double(r);
  if (r < 1 || dense < min_rate * factors) return {};
  p.rank = r;
  return p;
}

namespace {

double column_dot(const float* a, int64_t rows, int64_t cols, int64_t i, int64_t j) {
  double s = 0;
  for (int64_t k = 0; k < rows; ++k) s += double(a[k * cols + i]) * double(a[k * cols + j]);
  return s;
}

}  // namespace

bool orthogonalize_columns(float* a, int64_t rows, int64_t cols) {
  bool full_rank = true;
  for (int64_t i = 0; i < cols; ++i) {
    double norm = std::sqrt(column_dot(a, rows, cols, i, i));
    float inv = norm > 1e-20 ? float(1.0 / norm) : 0.0f;
    full_rank = full_rank && inv != 0.0f;
    for (int64_t k = 0; k < rows; ++k) a[k * cols + i] *= inv;
    for (int64_t j = i + 1; j < cols && inv != 0.0f; ++j) {
      float d = float(column_dot(a, rows, cols, i, j));
      for (int64_t k = 0; k < rows; ++k) a[k * cols + j] -= d * a[k * cols + i];
    }
  }
  return full_rank;
}

}  // namespace cohort::parallel::low_rank
