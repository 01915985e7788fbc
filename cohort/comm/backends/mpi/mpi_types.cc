// DType and ReduceOp to MPI datatypes and ops. f16 and bf16 have no MPI type in Open MPI, so
// they travel as 2-byte words and reduce through user-defined ops that call comm::reduce()
// (widen to float, combine, round to nearest even), the kernel the native backend uses.
#include <array>
#include <mutex>

#include "cohort/comm/backends/mpi/mpi_internal.h"
#include "cohort/comm/reduce.h"
#include "cohort/core/error.h"

namespace cohort::comm::mpi_detail {

namespace {

// MPI user function: inout[i] = in[i] op inout[i] (MPI's operand order).
template <DType T, ReduceOp Op>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  comm::reduce(T, Op, inout, in, inout, size_t(*len));
}

using UserFn = void (*)(void*, void*, int*, MPI_Datatype*);

// Index: (dtype is bf16) * kNumReduceOps + op; avg reduces as sum.
constexpr std::array<UserFn, 2 * kNumReduceOps> kHalfFns = {
    half_op<DType::f16, ReduceOp::sum>,  half_op<DType::f16, ReduceOp::sum>,
    half_op<DType::f16, ReduceOp::min>,  half_op<DType::f16, ReduceOp::max>,
    half_op<DType::f16, ReduceOp::prod>, half_op<DType::bf16, ReduceOp::sum>,
    half_op<DType::bf16, ReduceOp::sum>, half_op<DType::bf16, ReduceOp::min>,
    half_op<DType::bf16, ReduceOp::max>, half_op<DType::bf16, ReduceOp::prod>,
};

std::mutex g_ops_mu;
std::array<MPI_Op, 2 * kNumReduceOps> g_half_ops;
bool g_ops_created = false;

}  // namespace

MPI_Datatype datatype(DType t) {
  switch (t) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::f16:
    case DType::bf16:
      return MPI_UINT16_T;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
    case DType::u8:
      return MPI_UINT8_T;
  }
  throw InvalidArgument(detail::str("mpi: unknown dtype ", int(t)));
}

MPI_Op reduce_op(DType t, ReduceOp op) {
  if (t == DType::f16 || t == DType::bf16) {
    std::lock_guard<std::mutex> lock(g_ops_mu);
    if (!g_ops_created) {
      CallGuard guard;
      for (size_t i = 0; i < kHalfFns.size(); ++i) {
        int rc = MPI_Op_create(kHalfFns[i], /*commute=*/1, &g_half_ops[i]);
        COHORT_CHECK_IO(rc == MPI_SUCCESS, "mpi: MPI_Op_create failed: ", error_string(rc));
      }
      g_ops_created = true;
    }
    return g_half_ops[size_t(t == DType::bf16) * kNumReduceOps + size_t(op)];
  }
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return MPI_SUM;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::prod:
      return MPI_PROD;
  }
  throw InvalidArgument(detail::str("mpi: unknown reduce op ", int(op)));
}

}  // namespace cohort::comm::mpi_detail
