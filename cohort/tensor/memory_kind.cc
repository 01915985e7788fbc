#include "cohort/tensor/memory_kind.h"

namespace cohort {
namespace {
thread_local MemoryKind t_kind = MemoryKind::kOther;
}  // namespace

const char* memory_kind_name(MemoryKind k) {
  switch (k) {
    case MemoryKind::kOther:
      return "other";
    case MemoryKind::kParameters:
      return "parameters";
    case MemoryKind::kGradients:
      return "gradients";
    case MemoryKind::kOptimizer:
      return "optimizer";
    case MemoryKind::kCommunication:
      return "communication";
    case MemoryKind::kCount:
      break;
  }
  return "untracked";
}

MemoryKind current_memory_kind() {
  return t_kind;
}

MemoryKindScope::MemoryKindScope(MemoryKind kind) : outer_(t_kind) {
  t_kind = kind;
}
MemoryKindScope::~MemoryKindScope() {
  t_kind = outer_;
}

}  // namespace cohort
