#pragma once
// Little-endian fixed-width fields for the service channel's payloads: put() appends one,
// ByteReader takes them back with a bounds check on every read, so a truncated or oversized
// message is an InvalidArgument naming what was being read, never a read past the end.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/error.h"

namespace cohort::net::service {

template <typename T>
void put(std::vector<uint8_t>& b, T v) {
  const size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &v, sizeof(T));
}

inline void put_string(std::vector<uint8_t>& b, const std::string& s) {
  put(b, uint32_t(s.size()));
  b.insert(b.end(), s.begin(), s.end());
}

// Appends n values of T (a length prefix is the caller's business).
template <typename T>
void put_array(std::vector<uint8_t>& b, const T* v, size_t n) {
  const auto* p = reinterpret_cast<const uint8_t*>(v);
  b.insert(b.end(), p, p + n * sizeof(T));
}

class ByteReader {
 public:
  // `what` names the message in errors: "federated update from client 3".
  ByteReader(std::span<const uint8_t> b, std::string what) : b_(b), what_(std::move(what)) {}

  template <typename T>
  T get() {
    need(sizeof(T), "a field");
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof(T));
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
  // n values of T into out.
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

}  // namespace cohort::net::service
