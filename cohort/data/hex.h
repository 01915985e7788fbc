#pragma once
// "0x0000abcd": how the data readers name magic numbers, signatures and CRCs in their errors.
#include <cstdint>
#include <cstdio>
#include <string>

namespace cohort::data {

inline std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace cohort::data
