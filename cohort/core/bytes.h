#pragma once
// Little-endian fixed-width fields, the one byte reader/writer of cohort's wire formats (store
// and service frames, parameter-server and federated messages, the safetensors header length).
//
// store()/load() put a value's bytes at a pointer, least significant byte first, whatever the
// host's byte order; put() appends one to a byte vector. Integers, enums and floating-point
// values alike (a float travels as its bit pattern). Reader takes fields back with a bounds
// check on every read, so a truncated or oversized message is an InvalidArgument naming what
// was being read, never a read past the end.
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cohort/core/error.h"

namespace cohort::bytes {

namespace detail {
template <size_t N>
struct UIntOf;
template <>
struct UIntOf<1> {
  using type = uint8_t;
};
template <>
struct UIntOf<2> {
  using type = uint16_t;
};
template <>
struct UIntOf<4> {
  using type = uint32_t;
};
template <>
struct UIntOf<8> {
  using type = uint64_t;
};
// The unsigned integer with T's size: a value is moved as this, shifted byte by byte.
template <typename T>
using UInt = typename UIntOf<sizeof(T)>::type;
}  // namespace detail

// Writes v at p: sizeof(T) bytes, least significant first.
template <typename T>
void store(uint8_t* p, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto u = std::bit_cast<detail::UInt<T>>(v);
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = uint8_t(uint64_t(u) >> (8 * i));
}

// Reads the T that store() wrote at p.
template <typename T>
T load(const uint8_t* p) {
  static_assert(std::is_trivially_copyable_v<T>);
  uint64_t u = 0;
  for (size_t i = 0; i < sizeof(T); ++i) u |= uint64_t(p[i]) << (8 * i);
  return std::bit_cast<T>(detail::UInt<T>(u));
}

// Appends v (sizeof(T) bytes, little-endian).
template <typename T>
void put(std::vector<uint8_t>& b, T v) {
  const size_t at = b.size();
  b.resize(at + sizeof(T));
  store(b.data() + at, v);
}

// A u32 length, then the string's bytes.
inline void put_string(std::vector<uint8_t>& b, const std::string& s) {
  put(b, uint32_t(s.size()));
  b.insert(b.end(), s.begin(), s.end());
}

// Appends n values of T as they lie in memory (bulk payloads: tensors' floats); a length prefix
// is the caller's business.
template <typename T>
void put_array(std::vector<uint8_t>& b, const T* v, size_t n) {
  const auto* p = reinterpret_cast<const uint8_t*>(v);
  b.insert(b.end(), p, p + n * sizeof(T));
}

class Reader {
 public:
  // `what` names the message in errors: "federated update from client 3".
  Reader(std::span<const uint8_t> b, std::string what) : b_(b), what_(std::move(what)) {}

  template <typename T>
  T get() {
    need(sizeof(T), "a field");
    const T v = load<T>(b_.data() + at_);
    at_ += sizeof(T);
    return v;
  }
  std::string get_string(size_t max_bytes = 4096) {
    const uint32_t n = get<uint32_t>();
    COHORT_CHECK_ARG(n <= max_bytes, what_, ": a string of ", n, " bytes (at most ", max_bytes,
                     ")");
    need(n, "a string");
    std::string s(reinterpret_cast<const char*>(b_.data() + at_), n);
    at_ += n;
    return s;
  }
  // n values of T into out, as put_array() wrote them.
  template <typename T>
  void get_array(T* out, size_t n) {
    COHORT_CHECK_ARG(n <= remaining() / sizeof(T), what_, ": expected ", n, " values (",
                     n * sizeof(T), " bytes), only ", remaining(), " bytes left");
    if (n == 0) return;  // out may be null (an empty vector's data())
    std::memcpy(out, b_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
  }
  // The rest, in place (no copy): a pointer into the message and its size.
  const uint8_t* rest(size_t* n) const {
    *n = remaining();
    return b_.data() + at_;
  }
  // The rest, as bytes.
  std::vector<uint8_t> rest() {
    std::vector<uint8_t> r(b_.begin() + ptrdiff_t(at_), b_.end());
    at_ = b_.size();
    return r;
  }
  size_t remaining() const { return b_.size() - at_; }
  // InvalidArgument when bytes are left over: an oversized message is as wrong as a short one.
  void expect_end() const {
    COHORT_CHECK_ARG(remaining() == 0, what_, ": ", remaining(),
                     " unexpected bytes after the message's end (", b_.size(), " bytes in all)");
  }
  const std::string& what() const { return what_; }

 private:
  void need(size_t n, const char* item) const {
    COHORT_CHECK_ARG(remaining() >= n, what_, ": truncated (", b_.size(), " bytes) while reading ",
                     item);
  }
  std::span<const uint8_t> b_;
  std::string what_;
  size_t at_ = 0;
};

}  // namespace cohort::bytes
