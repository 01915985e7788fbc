#include "cohort/tensor/dtype.h"

namespace cohort {

std::string Device::str() const {
  return kind == Kind::kCPU ? "cpu" : "cuda:" + std::to_string(index);
}

}  // namespace cohort
