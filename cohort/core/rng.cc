#include "cohort/core/rng.h"

namespace cohort {
namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t derive_seed(uint64_t parent, const char* label) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char* p = label; *p; ++p) h = (h ^ uint8_t(*p)) * 0x100000001B3ull;
  return splitmix64(parent ^ splitmix64(h));
}
uint64_t derive_seed(uint64_t parent, uint64_t index) {
  return splitmix64(parent ^ splitmix64(index + 0x51ED270B27F1ull));
}

}  // namespace cohort
