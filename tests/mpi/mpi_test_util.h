#pragma once
// Helpers for the MPI backend tests: typed buffers of test values, a reference computed
// locally from every rank's values, and the fixture that only runs under mpirun.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cohort/comm/backends/mpi/mpi_backend.h"
#include "cohort/comm/reduce.h"
#include "cohort/comm/types.h"
#include "tests/support/reduce_reference.h"

namespace cohort::comm::mpi_test {

inline bool under_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;  // test-only read of the launcher env
}

// The job-wide communicator, created on first use (collective: every rank's tests run in the
// same order). Destroyed before MPI_Finalize, which create() registered first with atexit.
inline MpiCommunicator& world() {
  static std::shared_ptr<MpiCommunicator> w =
      MpiCommunicator::create({.timeout = std::chrono::seconds(30)});
  return *w;
}

// The same job with MpiOptions::blocking_collectives (MPI's blocking collectives).
inline MpiCommunicator& blocking_world() {
  static std::shared_ptr<MpiCommunicator> w =
      MpiCommunicator::create({.timeout = std::chrono::seconds(30), .blocking_collectives = true});
  return *w;
}

inline std::vector<MpiCommunicator*> both_modes() {
  return {&world(), &blocking_world()};
}

class MpiBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!under_mpirun()) GTEST_SKIP() << "runs under mpirun; MpiLaunch.* starts it with 3 ranks";
  }
};

inline constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                    DType::i32, DType::i64, DType::u8};
inline constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max,
                                    ReduceOp::prod};
// 0, 1, a prime, and a count not divisible by 3 ranks that spans several MPI segments.
inline constexpr size_t kSizes[] = {0, 1, 13, 40009};

inline bool is_float(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

// Rank r's element i: small values, exact in every dtype, so sums and products of 3 ranks are
// exact whatever order MPI combines them in.
inline double value(int rank, size_t i, DType t, ReduceOp op) {
  int k = int((size_t(rank) * 7 + i * 3) % 9);
  double v = op == ReduceOp::prod ? double(k % 3 == 0 ? 2 : k % 3 == 1 ? 1 : -1) : double(k - 4);
  if (t == DType::u8 && v < 0) v = -v;
  if (is_float(t) && op != ReduceOp::prod) v *= 0.5;
  return v;
}

inline void store(DType t, void* buf, size_t i, double v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(buf)[i] = float(v);
      break;
    case DType::f64:
      static_cast<double*>(buf)[i] = v;
      break;
    case DType::f16:
      static_cast<uint16_t*>(buf)[i] = float_to_half(float(v));
      break;
    case DType::bf16:
      static_cast<uint16_t*>(buf)[i] = float_to_bf16(float(v));
      break;
    case DType::i32:
      static_cast<int32_t*>(buf)[i] = int32_t(v);
      break;
    case DType::i64:
      static_cast<int64_t*>(buf)[i] = int64_t(v);
      break;
    case DType::u8:
      static_cast<uint8_t*>(buf)[i] = uint8_t(v);
      break;
  }
}

inline double load(DType t, const void* buf, size_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(buf)[i];
    case DType::f64:
      return static_cast<const double*>(buf)[i];
    case DType::f16:
      return half_to_float(static_cast<const uint16_t*>(buf)[i]);
    case DType::bf16:
      return bf16_to_float(static_cast<const uint16_t*>(buf)[i]);
    case DType::i32:
      return static_cast<const int32_t*>(buf)[i];
    case DType::i64:
      return double(static_cast<const int64_t*>(buf)[i]);
    case DType::u8:
      return static_cast<const uint8_t*>(buf)[i];
  }
  return 0;
}

struct Buffer {
  DType dtype;
  std::vector<char> bytes;
  Buffer(DType t, size_t n) : dtype(t), bytes(std::max<size_t>(1, n * dtype_size(t)), 0) {}
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }
  size_t count() const { return bytes.size() / dtype_size(dtype); }
};

// rank's values at elements [offset, offset + n), stored at the buffer's start + at.
inline void fill(Buffer& b, int rank, ReduceOp op, size_t offset, size_t n, size_t at = 0) {
  for (size_t i = 0; i < n; ++i)
    store(b.dtype, b.data(), at + i, value(rank, offset + i, b.dtype, op));
}

// The reduction of every rank's elements [offset, offset + n), combined in double (exact for
// these values), stored in dtype, and for avg divided as the backends do.
inline Buffer reference(DType t, ReduceOp op, int size, size_t offset, size_t n) {
  Buffer out(t, n);
  for (size_t i = 0; i < n; ++i) {
    double acc = value(0, offset + i, t, op);
    for (int r = 1; r < size; ++r) {
      double v = value(r, offset + i, t, op);
      acc = cohort::testing::reference_combine(op, acc, v);
    }
    store(t, out.data(), i, acc);
  }
  if (op == ReduceOp::avg && n > 0) divide_by(t, out.data(), n, size);
  return out;
}

// Bitwise equality of the first n elements, naming the first difference.
inline ::testing::AssertionResult same(const void* got, const void* want, DType t, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    size_t w = dtype_size(t);
    if (std::memcmp(static_cast<const char*>(got) + i * w, static_cast<const char*>(want) + i * w,
                    w) != 0) {
      return ::testing::AssertionFailure()
             << dtype_name(t) << " element " << i << " of " << n << ": got " << load(t, got, i)
             << ", want " << load(t, want, i);
    }
  }
  return ::testing::AssertionSuccess();
}

inline std::string label(DType t, ReduceOp op, size_t n) {
  return std::string(dtype_name(t)) + " " + reduce_op_name(op) + " count " + std::to_string(n);
}

inline std::string label(DType t, size_t n) {
  return std::string(dtype_name(t)) + " count " + std::to_string(n);
}

}  // namespace cohort::comm::mpi_test
