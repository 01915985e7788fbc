#pragma once
// Typed buffers and references for collective tests. Values are small integers (or products
// of +-1 and 2), exactly representable in every dtype, so a straightforward reference computed
// in double is exact whatever order the algorithm reduces in.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cohort/comm/collectives.h"
#include "cohort/rendezvous/hash_store.h"
#include "tests/comm/comm_test_util.h"
#include "tests/support/reduce_reference.h"

namespace cohort::comm::testing {

inline const std::vector<DType> kAllDTypes = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                              DType::i32, DType::i64, DType::u8};
inline const std::vector<ReduceOp> kAllOps = {ReduceOp::sum, ReduceOp::avg, ReduceOp::min,
                                              ReduceOp::max, ReduceOp::prod};

inline void put(DType t, void* buf, size_t i, double v) {
  char* p = static_cast<char*>(buf) + i * dtype_size(t);
  switch (t) {
    case DType::f32: {
      float x = float(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::f64:
      std::memcpy(p, &v, 8);
      break;
    case DType::f16: {
      uint16_t h = float_to_half(float(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::bf16: {
      uint16_t h = float_to_bf16(float(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::i32: {
      int32_t x = int32_t(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::i64: {
      int64_t x = int64_t(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case DType::u8: {
      uint8_t x = uint8_t(int64_t(v) & 0xff);
      std::memcpy(p, &x, 1);
      break;
    }
  }
}

inline double get(DType t, const void* buf, size_t i) {
  const char* p = static_cast<const char*>(buf) + i * dtype_size(t);
  switch (t) {
    case DType::f32: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DType::f64: {
      double x;
      std::memcpy(&x, p, 8);
      return x;
    }
    case DType::f16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return half_to_float(h);
    }
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return bf16_to_float(h);
    }
    case DType::i32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DType::i64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return double(x);
    }
    case DType::u8: {
      uint8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
  }
  return 0;
}

// Rank r's element i for a reduction with op.
inline double value(DType t, ReduceOp op, int r, size_t i) {
  if (op == ReduceOp::prod) {
    if (t == DType::u8) return double(1 + (i + size_t(r)) % 3);
    static const double kFactors[3] = {1, -1, 2};
    return kFactors[(i + size_t(r)) % 3];
  }
  double v = double((i * 7 + size_t(r) * 3 + 1) % 11);
  return t == DType::u8 ? v : v - 5;
}

inline std::vector<char> make_input(DType t, ReduceOp op, int r, size_t count, size_t first = 0) {
  std::vector<char> b(count * dtype_size(t) + 1);  // +1: never a null data() for count 0
  for (size_t i = 0; i < count; ++i) put(t, b.data(), i, value(t, op, r, first + i));
  return b;
}

// The reduction of element i over ranks [0, n), then rounded into dtype t.
inline std::vector<char> reference(DType t, ReduceOp op, int n, size_t count, size_t first = 0) {
  std::vector<char> out(count * dtype_size(t) + 1);
  bool integer = t == DType::i32 || t == DType::i64 || t == DType::u8;
  for (size_t i = 0; i < count; ++i) {
    double acc = value(t, op, 0, first + i);
    for (int r = 1; r < n; ++r) {
      double v = value(t, op, r, first + i);
      acc = cohort::testing::reference_combine(op, acc, v);
    }
    if (t == DType::u8) acc = double(int64_t(acc) & 0xff);  // wrap like the kernel
    if (op == ReduceOp::avg) {
      if (integer) {
        acc = double(int64_t(acc) / n);
      } else if (t != DType::f64) {
        acc = double(float(acc) / float(n));
      } else {
        acc = acc / n;
      }
    }
    put(t, out.data(), i, acc);
  }
  return out;
}

// "" if equal, else where and how they differ.
inline std::string compare(DType t, const void* got, const void* want, size_t count) {
  size_t e = dtype_size(t);
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(static_cast<const char*>(got) + i * e, static_cast<const char*>(want) + i * e,
                    e) != 0) {
      return detail::str("element ", i, " of ", count, ": got ", get(t, got, i), ", want ",
                         get(t, want, i));
    }
  }
  return "";
}

inline CommOptions test_options(transport::TransportKind kind) {
  CommOptions o;
  o.device.transport = kind;
  o.device.shm_ring_bytes = 64 << 10;
  o.timeout = std::chrono::seconds(20);
  o.connect_timeout = std::chrono::seconds(20);
  o.chunk_bytes = 1024;  // small chunks: test-sized buffers still stream in many pieces
  return o;
}

// Runs fn(comm) on `size` ranks-as-threads, each with its own Communicator.
inline void with_comms(int size, const CommOptions& options,
                       const std::function<void(Communicator&)>& fn) {
  auto store = std::make_shared<rendezvous::HashStore>();
  run_ranks(size, [&](int r) {
    auto c = Communicator::create(store, r, size, options);
    fn(*c);
  });
}

}  // namespace cohort::comm::testing
