#include "cohort/ops/checks.h"

namespace cohort::ops {

void check_f32(const Tensor& t, const char* op, const char* name) {
  COHORT_CHECK_ARG(t.defined(), op, ": ", name, " is an undefined tensor");
  COHORT_CHECK_ARG(t.dtype() == DType::f32, op, ": ", name, " must be float32, got ",
                   dtype_name(t.dtype()), " (shape ", shape_str(t.shape()), ")");
}

void check_cpu(const Tensor& t, const char* op) {
  COHORT_CHECK_ARG(!t.defined() || t.device().is_cpu(), op, " has no kernel on ", t.device().str(),
                   " yet: run it on the CPU (docs/gpu.md lists the ops that run on a GPU)");
}

}  // namespace cohort::ops
