#pragma once
// Input checks shared by the ops. Messages name the op, the argument and what it got:
// "matmul: a must be float32, got int64 (shape [2, 3])".
#include "cohort/tensor/tensor.h"

namespace cohort::ops {

// t is defined and float32 (the dtype today's kernels compute in).
void check_f32(const Tensor& t, const char* op, const char* name = "input");

// t is on the CPU: for the ops that have no kernel on another device yet (InvalidArgument
// naming the op and the device, never CPU code on device memory).
void check_cpu(const Tensor& t, const char* op);

}  // namespace cohort::ops
