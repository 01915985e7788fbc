#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
// Counter-based: the value at counter c depends only on (key, c), so a tensor filled in
// parallel gets the same numbers whatever the thread count or the chunking.
#include <array>
#include <cmath>
#include <cstdint>

namespace cohort {

class Philox {
 public:
  using Block = std::array<uint32_t, 4>;

  explicit Philox(uint64_t seed) : key_{uint32_t(seed), uint32_t(seed >> 32)} {}

  // Four 32-bit words for 128-bit counter (ctr_hi:ctr_lo). Pure: no state changes.
  Block block(uint64_t ctr_lo, uint64_t ctr_hi = 0) const {
    Block c{uint32_t(ctr_lo), uint32_t(ctr_lo >> 32), uint32_t(ctr_hi), uint32_t(ctr_hi >> 32)};
    uint32_t k0 = key_[0], k1 = key_[1];
    for (int round = 0; round < 10; ++round) {
      uint64_t p0 = uint64_t(kMul0) * c[0];
      uint64_t p1 = uint64_t(kMul1) * c[2];
      c = {uint32_t(p1 >> 32) ^ c[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k1,
           uint32_t(p0)};
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    return c;
  }

  // Uniform float in [0, 1) for element i of stream `stream`.
  float uniform(uint64_t i, uint64_t stream = 0) const {
    return to_unit(block(i / 4, stream)[i % 4]);
  }
  // Standard normal for element i (Box-Muller over one block: elements 2j, 2j+1 share it).
  float normal(uint64_t i, uint64_t stream = 0) const {
    Block b = block(i / 2, stream);
    float u1 = to_unit(b[0]);
    float u2 = to_unit(b[1]);
    float r = std::sqrt(-2.0f * std::log(1.0f - u1));  // 1-u1 in (0,1]: log is finite
    float theta = 6.2831853071795864f * u2;
    return (i % 2 == 0) ? r * std::cos(theta) : r * std::sin(theta);
  }
  static float to_unit(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }

 private:
  static constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  static constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  std::array<uint32_t, 2> key_;
};

// A seed derived from a parent seed and a label (a parameter name, a purpose): stable across
// runs and platforms (FNV-1a over the label, mixed with splitmix64).
uint64_t derive_seed(uint64_t parent, const char* label);
uint64_t derive_seed(uint64_t parent, uint64_t index);

}  // namespace cohort
