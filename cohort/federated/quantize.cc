#include "cohort/federated/quantize.h"

#include <cmath>

#include "cohort/core/error.h"

namespace cohort::federated {
namespace {

void check_frac_bits(int frac_bits) {
  COHORT_CHECK_ARG(frac_bits >= 0 && frac_bits <= 62, "quantize: frac_bits ", frac_bits,
                   " must be in [0, 62]");
}

}  // namespace

void quantize(std::span<const float> x, int frac_bits, std::span<uint64_t> out) {
  check_frac_bits(frac_bits);
  COHORT_CHECK_ARG(x.size() == out.size(), "quantize: ", x.size(), " inputs but ", out.size(),
                   " outputs");
  const double scale = std::ldexp(1.0, frac_bits);  // exact: a float times 2^k fits a double
  constexpr double kLimit = 9223372036854775808.0;  // 2^63
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = std::nearbyint(static_cast<double>(x[i]) * scale);
    COHORT_CHECK_ARG(std::isfinite(v) && v >= -kLimit && v < kLimit, "quantize: element ", i, " = ",
                     x[i], " does not fit in 64 bits with ", frac_bits, " fractional bits");
    out[i] = static_cast<uint64_t>(static_cast<int64_t>(v));
  }
}

void dequantize(std::span<const uint64_t> q, int frac_bits, std::span<float> out) {
  check_frac_bits(frac_bits);
  COHORT_CHECK_ARG(q.size() == out.size(), "dequantize: ", q.size(), " inputs but ", out.size(),
                   " outputs");
  const double scale = std::ldexp(1.0, -frac_bits);
  for (size_t i = 0; i < q.size(); ++i)
    out[i] = static_cast<float>(static_cast<double>(static_cast<int64_t>(q[i])) * scale);
}

}  // namespace cohort::federated
