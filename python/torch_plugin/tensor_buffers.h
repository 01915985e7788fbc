#pragma once
// How torch tensors become the raw buffers cohort's Communicator moves (comm/options.h), for
// ProcessGroupCohort. Inline: included by the plugin's two ProcessGroup translation units
// only, so it adds no unit of its own.
//
// Movement (broadcast, gathers, scatters, all-to-all, send/recv) is by bytes, so every dtype
// moves. Reductions need a dtype cohort's reduce kernels know (comm/reduce.h: f32 f64 f16 bf16
// i32 i64 u8); int8 and int16 are reduced in int32 and narrowed back (sum and product wrap
// modulo 2^8 / 2^16 exactly as in their own width), bool is reduced as u8 with logical
// meaning (sum and max: or; product and min: and).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <functional>
#include <vector>

#include "cohort/comm/collectives.h"
#include "cohort/comm/options.h"
#include "cohort/comm/work.h"

namespace cohort::torch_plugin {

// Runs after the operation succeeded, on the completion thread: copies back into the caller's
// tensors where a staging buffer stood in for them.
using AfterList = std::vector<std::function<void()>>;

// The element type and op cohort reduces a tensor of `type` with, and the dtype its staging
// buffer has (`staged`, the tensor's own where no conversion is needed).
struct ReduceTarget {
  at::ScalarType staged;
  comm::DType dtype;
  comm::ReduceOp op;
};
// Staging and copying back never record autograd history (gloo writes tensor memory directly,
// so a leaf that requires grad may be an operand).
struct NoGrad : c10::AutoGradMode {
  NoGrad() : c10::AutoGradMode(false) {}
};

// torch's "unset" (-1) is the group's timeout, which is the Communicator's default (0).
inline std::chrono::milliseconds op_timeout(std::chrono::milliseconds t) {
  return t.count() < 0 ? std::chrono::milliseconds{0} : t;
}

// Internal all-to-all messages carry this tag; user tags are non-negative ints below it.
constexpr uint32_t kAlltoallTag = 0xffffffffu;

inline void* ptr(const at::Tensor& t) {
  return t.data_ptr();
}
inline size_t bytes(const at::Tensor& t) {
  return t.nbytes();
}

// A Work that is already done (operations with nothing to send).
inline comm::Work finished(const char* name) {
  comm::Work w = comm::Work::pending(name);
  w.complete(nullptr);
  return w;
}

// Every rank's bytes of `in` gathered into `out`: the gathers and the bitwise reductions move
// bytes, whatever the dtype.
inline std::function<comm::Work(comm::Communicator&)> allgather_bytes(
    const at::Tensor& in, const at::Tensor& out, std::chrono::milliseconds timeout) {
  return [=](comm::Communicator& c) {
    return comm::allgather_async(c, {.input = ptr(in),
                                     .output = ptr(out),
                                     .count = bytes(in),
                                     .dtype = comm::DType::u8,
                                     .timeout = timeout});
  };
}

inline std::function<void()> run_all(AfterList after) {
  if (after.empty()) return {};
  return [after = std::move(after)] {
    for (const auto& f : after) f();
  };
}

inline void check_tensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "cohort backend: ", op, " got an undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "cohort backend: ", op, " got a tensor on ", t.device(),
              "; the cohort backend moves CPU tensors only (move it with .cpu(), or use the "
              "nccl backend for GPU tensors)");
  TORCH_CHECK(t.layout() == at::kStrided, "cohort backend: ", op, " got a ", t.layout(),
              " tensor; the cohort backend moves dense tensors only (use .to_dense())");
}

inline void check_single(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "cohort backend: ", op, " takes one tensor per call (got ", ts.size(),
              ")");
  check_tensor(ts[0], op);
}

inline void check_same(const std::vector<at::Tensor>& ts, const at::Tensor& like, const char* op,
                       const char* what) {
  for (size_t k = 0; k < ts.size(); ++k) {
    check_tensor(ts[k], op);
    TORCH_CHECK(ts[k].scalar_type() == like.scalar_type() && ts[k].numel() == like.numel(),
                "cohort backend: ", op, ": ", what, "[", k, "] is ", ts[k].scalar_type(), " of ",
                ts[k].numel(), " elements, but the input is ", like.scalar_type(), " of ",
                like.numel());
  }
}

inline at::Tensor bytes_buffer(const at::Tensor& t, bool writes, AfterList& after) {
  at::Tensor c = t.contiguous();
  if (writes && !c.is_same(t)) after.push_back([t, c]() mutable { t.copy_(c); });
  return c;
}

inline at::Tensor concat(const std::vector<at::Tensor>& ts, at::ScalarType type) {
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const auto& t : ts) flat.push_back(t.reshape(-1).to(type));
  return at::cat(flat);
}

inline void copy_blocks_back(const at::Tensor& buffer, const std::vector<at::Tensor>& ts,
                             AfterList& after) {
  after.push_back([buffer, ts]() mutable {
    int64_t offset = 0;
    for (auto& t : ts) {
      t.copy_(buffer.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  });
}

inline const char* reduce_op_name(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "an unknown ReduceOp";
  }
}

inline ReduceTarget reduce_target(at::ScalarType type, const c10d::ReduceOp& op,
                                  const char* op_name) {
  comm::ReduceOp cop = comm::ReduceOp::sum;
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      cop = comm::ReduceOp::sum;
      break;
    case c10d::ReduceOp::AVG:
      cop = comm::ReduceOp::avg;
      break;
    case c10d::ReduceOp::PRODUCT:
      cop = comm::ReduceOp::prod;
      break;
    case c10d::ReduceOp::MIN:
      cop = comm::ReduceOp::min;
      break;
    case c10d::ReduceOp::MAX:
      cop = comm::ReduceOp::max;
      break;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(false, "cohort backend: ", op_name, " with ReduceOp.", reduce_op_name(op),
                  " is not supported (all_reduce supports it on integer and bool tensors)");
    default:
      TORCH_CHECK(false, "cohort backend: ", op_name, " with ReduceOp.", reduce_op_name(op),
                  " is not supported (PREMUL_SUM is NCCL's; multiply, then use SUM)");
  }
  switch (type) {
    case at::kFloat:
      return {type, comm::DType::f32, cop};
    case at::kDouble:
      return {type, comm::DType::f64, cop};
    case at::kHalf:
      return {type, comm::DType::f16, cop};
    case at::kBFloat16:
      return {type, comm::DType::bf16, cop};
    case at::kInt:
      return {type, comm::DType::i32, cop};
    case at::kLong:
      return {type, comm::DType::i64, cop};
    case at::kByte:
      return {type, comm::DType::u8, cop};
    case at::kChar:
    case at::kShort:
      return {at::kInt, comm::DType::i32, cop};
    case at::kBool:
      TORCH_CHECK(cop != comm::ReduceOp::avg, "cohort backend: ", op_name,
                  " with ReduceOp.AVG is not defined for bool tensors (use MAX for 'any' or "
                  "MIN for 'all')");
      // Logical meaning on 0/1 bytes: sum and max are "or", product and min are "and".
      return {at::kByte, comm::DType::u8,
              cop == comm::ReduceOp::sum || cop == comm::ReduceOp::max ? comm::ReduceOp::max
                                                                       : comm::ReduceOp::min};
    default:
      TORCH_CHECK(false, "cohort backend: ", op_name, " does not reduce ", type,
                  " tensors (it reduces float32, float64, float16, bfloat16, int8, int16, "
                  "int32, int64, uint8 and bool)");
  }
}

inline at::Tensor reduce_buffer(const at::Tensor& t, const ReduceTarget& target, bool writes,
                                AfterList& after) {
  at::Tensor buf;
  if (t.scalar_type() == at::kBool) {
    at::Tensor c = t.contiguous();  // bool and uint8 share a byte layout: a view, no copy
    if (writes && !c.is_same(t)) after.push_back([t, c]() mutable { t.copy_(c); });
    return c.view(at::kByte);
  }
  if (t.scalar_type() == target.staged && t.is_contiguous()) return t;
  buf = t.contiguous().to(target.staged);
  // copy_ narrows int32 back to int8/int16 modulo 2^8 / 2^16: the same wrap as adding there.
  if (writes) after.push_back([t, buf]() mutable { t.copy_(buf); });
  return buf;
}

inline bool is_bitwise(const c10d::ReduceOp& op) {
  return op.op_ == c10d::ReduceOp::BAND || op.op_ == c10d::ReduceOp::BOR ||
         op.op_ == c10d::ReduceOp::BXOR;
}

inline void check_bitwise(const at::Tensor& t, const c10d::ReduceOp& op, const char* op_name) {
  const bool integral = at::isIntegralType(t.scalar_type(), /*includeBool=*/true);
  TORCH_CHECK(integral, "cohort backend: ", op_name, " with ReduceOp.", reduce_op_name(op),
              " needs an integer or bool tensor (got ", t.scalar_type(), ")");
}

inline at::Tensor fold_bitwise(const at::Tensor& rows, const c10d::ReduceOp& op) {
  at::Tensor acc = rows[0].clone();
  for (int64_t k = 1; k < rows.size(0); ++k) {
    if (op.op_ == c10d::ReduceOp::BAND) {
      acc.bitwise_and_(rows[k]);
    } else if (op.op_ == c10d::ReduceOp::BOR) {
      acc.bitwise_or_(rows[k]);
    } else {
      acc.bitwise_xor_(rows[k]);
    }
  }
  return acc;
}

}  // namespace cohort::torch_plugin
