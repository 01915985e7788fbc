#pragma once
// Argument checks and Op construction shared by the collectives' .cc files.
#include <initializer_list>

#include "cohort/comm/collectives.h"

namespace cohort::comm::internal {

// InvalidArgument unless dtype is valid and buffer is non-null when count > 0.
void check_common(const char* op, const Communicator& c, DType dtype, size_t count,
                  const void* buffer, const char* buffer_name);
void check_root(const char* op, const Communicator& c, int root);
void check_algorithm(const char* op, Algorithm chosen, std::initializer_list<Algorithm> valid);
Communicator::Op make_op(OpCode code, DType dtype, ReduceOp rop, Algorithm algo, int root,
                         uint64_t count, milliseconds timeout);

}  // namespace cohort::comm::internal
