#include "cohort/kernels/cpu/reduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "cohort/core/thread_pool.h"
#include "cohort/kernels/cpu/simd.h"
#include "cohort/kernels/cpu/vmath.h"

#pragma GCC diagnostic ignored "-Wpsabi"  // f32x8 helpers are always inlined (vmath.h)

namespace cohort::cpu {
namespace {

constexpr int64_t kReduceGrain = 1 << 15;  // elements per parallel chunk
constexpr int64_t kRowBlock = 4096;        // a row is summed in float blocks of this many...
constexpr int64_t kColBlock = 512;         // ...and a column in float blocks of this many rows,
constexpr int64_t kColTile = 256;          // the block sums added up in double.

// Sum of x[0, n) in 4 x 8 float lanes (n <= kRowBlock, so float keeps ~1e-7 relative error).
COHORT_VINLINE float block_sum(const float* x, int64_t n) {
  f32x8 a0{}, a1{}, a2{}, a3{};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 += load8(x + i);
    a1 += load8(x + i + 8);
    a2 += load8(x + i + 16);
    a3 += load8(x + i + 24);
  }
  for (; i + 8 <= n; i += 8) a0 += load8(x + i);
  if (i < n) a1 += load8_partial(x + i, n - i, 0.0f);
  return hsum8((a0 + a1) + (a2 + a3));
}

// x [rows, r] -> out [rows].
COHORT_SIMD_CLONES void row_sums_loop(const float* x, int64_t rows, int64_t r, float* out) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* p = x + row * r;
    double acc = 0;
    for (int64_t b = 0; b < r; b += kRowBlock) acc += block_sum(p + b, std::min(kRowBlock, r - b));
    out[row] = float(acc);
  }
}

// part[b] = sum of block b of x [n] (blocks of kRowBlock), for b in [lo, hi).
COHORT_SIMD_CLONES void block_sums_loop(const float* x, int64_t n, int64_t lo, int64_t hi,
                                        double* part) {
  for (int64_t b = lo; b < hi; ++b) {
    int64_t s = b * kRowBlock;
    part[b] = block_sum(x + s, std::min(kRowBlock, n - s));
  }
}

// x [r, ld] (rows ld apart) -> out [ncols] = column sums of the first ncols columns.
COHORT_SIMD_CLONES void col_sums_loop(const float* x, int64_t r, int64_t ld, int64_t ncols,
                                      float* out) {
  float tile[kColTile];
  double acc[kColTile];
  for (int64_t c0 = 0; c0 < ncols; c0 += kColTile) {
    const int64_t w = std::min(kColTile, ncols - c0);
    for (int64_t i = 0; i < w; ++i) acc[i] = 0;
    for (int64_t j0 = 0; j0 < r; j0 += kColBlock) {
      const int64_t j1 = std::min(r, j0 + kColBlock);
      std::memcpy(tile, x + j0 * ld + c0, size_t(w) * sizeof(float));
      for (int64_t j = j0 + 1; j < j1; ++j) {
        const float* row = x + j * ld + c0;
        for (int64_t i = 0; i < w; ++i) tile[i] += row[i];
      }
      for (int64_t i = 0; i < w; ++i) acc[i] += tile[i];
    }
    for (int64_t i = 0; i < w; ++i) out[c0 + i] = float(acc[i]);
  }
}

void sum_one_row(const float* x, int64_t r, float* out) {
  if (r <= 2 * kReduceGrain) {
    row_sums_loop(x, 1, r, out);
    return;
  }
  // One long row: block sums in parallel, added in block order, the same sequence of
  // operations as row_sums_loop, so the result does not depend on the thread count.
  const int64_t nb = (r + kRowBlock - 1) / kRowBlock;
  std::vector<double> part(static_cast<size_t>(nb));
  parallel_for(0, nb, kReduceGrain / kRowBlock,
               [&](int64_t lo, int64_t hi) { block_sums_loop(x, r, lo, hi, part.data()); });
  double acc = 0;
  for (double p : part) acc += p;
  *out = float(acc);
}

// Keeps NaN: a NaN is the maximum, the first one wins.
inline bool beats(float v, float best) {
  return v > best || (v != v && best == best);
}

// x [rows, r] -> val, idx [rows]: max over each row, then its first position.
COHORT_SIMD_CLONES void row_max_loop(const float* x, int64_t rows, int64_t r, float* val,
                                     int64_t* idx) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* p = x + row * r;
    f32x8 m = splat8(-__builtin_inff());
    int64_t i = 0;
    for (; i + 8 <= r; i += 8) m = max8(m, load8(p + i));
    if (i < r) m = max8(m, load8_partial(p + i, r - i, -__builtin_inff()));
    const float best = hmax8(m);
    val[row] = best;
    if (!idx) continue;
    int64_t at = 0;
    if (best == best) {
      while (p[at] != best) ++at;
    } else {
      while (p[at] == p[at]) ++at;
    }
    idx[row] = at;
  }
}

// x [r, inner] -> val, idx [inner]: max over r for each column.
void col_max_loop(const float* x, int64_t r, int64_t inner, float* val, int64_t* idx) {
  std::memcpy(val, x, size_t(inner) * sizeof(float));
  if (idx) std::fill(idx, idx + inner, int64_t(0));
  for (int64_t j = 1; j < r; ++j) {
    const float* row = x + j * inner;
    for (int64_t i = 0; i < inner; ++i) {
      if (beats(row[i], val[i])) {
        val[i] = row[i];
        if (idx) idx[i] = j;
      }
    }
  }
}

// Rows of `outer` per parallel chunk so that each chunk touches ~kReduceGrain elements.
int64_t outer_grain(int64_t per_outer) {
  return std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(1, per_outer));
}

}  // namespace

void sum_middle(const float* x, int64_t outer, int64_t r, int64_t inner, float* out) {
  if (outer <= 0 || inner <= 0) return;
  if (r == 0) {
    std::fill(out, out + outer * inner, 0.0f);
    return;
  }
  if (inner == 1) {
    if (outer == 1) return sum_one_row(x, r, out);
    parallel_for(0, outer, outer_grain(r),
                 [&](int64_t lo, int64_t hi) { row_sums_loop(x + lo * r, hi - lo, r, out + lo); });
    return;
  }
  if (outer == 1) {
    // Split the columns: each column's sum is the same sequence of operations either way.
    parallel_for(0, inner, std::max<int64_t>(64, kReduceGrain / r), [&](int64_t lo, int64_t hi) {
      col_sums_loop(x + lo, r, inner, hi - lo, out + lo);
    });
    return;
  }
  parallel_for(0, outer, outer_grain(r * inner), [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o)
      col_sums_loop(x + o * r * inner, r, inner, inner, out + o * inner);
  });
}

void max_middle(const float* x, int64_t outer, int64_t r, int64_t inner, float* val, int64_t* idx) {
  if (outer <= 0 || inner <= 0 || r <= 0) return;
  if (inner == 1) {
    parallel_for(0, outer, outer_grain(r), [&](int64_t lo, int64_t hi) {
      row_max_loop(x + lo * r, hi - lo, r, val + lo, idx ? idx + lo : nullptr);
    });
    return;
  }
  parallel_for(0, outer, outer_grain(r * inner), [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o)
      col_max_loop(x + o * r * inner, r, inner, val + o * inner, idx ? idx + o * inner : nullptr);
  });
}

void max_middle_backward(const float* g, const int64_t* idx, int64_t outer, int64_t r,
                         int64_t inner, float* dx) {
  std::memset(dx, 0, size_t(outer * r * inner) * sizeof(float));
  for (int64_t o = 0; o < outer; ++o) {
    float* d = dx + o * r * inner;
    for (int64_t i = 0; i < inner; ++i) d[idx[o * inner + i] * inner + i] = g[o * inner + i];
  }
}

void broadcast_middle(const float* g, int64_t outer, int64_t r, int64_t inner, float scale,
                      float* out) {
  parallel_for(0, outer, outer_grain(r * inner), [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o) {
      const float* src = g + o * inner;
      float* dst = out + o * r * inner;
      if (inner == 1) {
        std::fill(dst, dst + r, src[0] * scale);
        continue;
      }
      for (int64_t j = 0; j < r; ++j, dst += inner) {
        if (scale == 1.0f) {
          std::memcpy(dst, src, size_t(inner) * sizeof(float));
        } else {
          for (int64_t i = 0; i < inner; ++i) dst[i] = src[i] * scale;
        }
      }
    }
  });
}

}  // namespace cohort::cpu
