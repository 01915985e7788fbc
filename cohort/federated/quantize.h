#pragma once
// Fixed-point encoding of float vectors into Z_2^64, the ring secure aggregation (secagg.h)
// sums in: q = round(x * 2^frac_bits) as a two's-complement int64, stored as uint64. Adding
// encodings with wrap-around is adding the int64s, so the sum of n encodings decodes to the
// true sum within n * 2^-(frac_bits+1) (each rounding is at most half a step), as long as the
// partial sums' magnitude stays below 2^(63 - frac_bits). Choose frac_bits with the number of
// users and the largest update in mind: e.g. 1000 users, |x| <= 1e3 leaves frac_bits <= 33.
#include <cstdint>
#include <span>

namespace cohort::federated {

// InvalidArgument when the sizes differ, frac_bits is outside [0, 62], or an element is not
// finite or |x| * 2^frac_bits does not fit in an int64 (naming the index).
void quantize(std::span<const float> x, int frac_bits, std::span<uint64_t> out);
// The inverse: q read as int64, times 2^-frac_bits, rounded to float.
void dequantize(std::span<const uint64_t> q, int frac_bits, std::span<float> out);

}  // namespace cohort::federated
