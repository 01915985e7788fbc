#include "cohort/parallel/ddp/comm_hook.h"

namespace cohort::parallel {

comm::Work AllreduceHook::run(comm::ProcessGroup& group, const GradBucket& bucket) {
  return group.allreduce_async({.output = bucket.data,
                                .count = bucket.numel,
                                .dtype = comm::DType::f32,
                                .op = comm::ReduceOp::avg,
                                .timeout = bucket.timeout});
}

}  // namespace cohort::parallel
