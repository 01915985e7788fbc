#include "cohort/federated/dp.h"

#include <cmath>

#include "cohort/core/error.h"
#include "cohort/core/rng.h"

namespace cohort::federated {

double clip_l2(std::span<float> v, double clip) {
  COHORT_CHECK_ARG(clip > 0 && std::isfinite(clip), "fl.dp.clip must be a finite number > 0, got ",
                   clip);
  double sum = 0;
  for (float x : v) sum += double(x) * double(x);
  const double norm = std::sqrt(sum);
  COHORT_CHECK_ARG(std::isfinite(norm), "clip_l2: the update holds a NaN or an infinity");
  if (norm > clip) {
    const double scale = clip / norm;
    for (float& x : v) x = float(double(x) * scale);
  }
  return norm;
}

void add_gaussian_noise(std::span<float> v, double stddev, uint64_t seed, uint64_t stream) {
  COHORT_CHECK_ARG(stddev >= 0 && std::isfinite(stddev),
                   "add_gaussian_noise: stddev must be a finite number >= 0, got ", stddev);
  if (stddev == 0) return;
  const Philox philox(seed);
  constexpr double kTwoPi = 6.283185307179586;
  for (size_t i = 0; i < v.size(); i += 2) {
    Philox::Block b = philox.block(i / 2, stream);
    // u1 in (0, 1]: log(u1) is finite; u2 in [0, 1).
    double u1 = (double(((uint64_t(b[1]) << 32) | b[0]) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = double(((uint64_t(b[3]) << 32) | b[2]) >> 11) * 0x1.0p-53;
    double r = stddev * std::sqrt(-2.0 * std::log(u1));
    v[i] += float(r * std::cos(kTwoPi * u2));
    if (i + 1 < v.size()) v[i + 1] += float(r * std::sin(kTwoPi * u2));
  }
}

}  // namespace cohort::federated
