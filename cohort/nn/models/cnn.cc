#include "cohort/nn/models/cnn.h"

#include "cohort/ops/ops.h"

namespace cohort::nn {
namespace {

// After conv 3x3 (no padding) and max-pool 2, twice.
int64_t pooled(int64_t n) {
  return ((n - 2) / 2 - 2) / 2;
}

}  // namespace

CNN::CNN(CnnOptions opt) : opt_(opt) {
  COHORT_CHECK_ARG(opt.channels >= 1 && opt.classes >= 2 && opt.height >= 10 && opt.width >= 10,
                   "CNN: needs images of at least 10x10 with >= 1 channel and >= 2 classes (got ",
                   opt.channels, "x", opt.height, "x", opt.width, ", ", opt.classes, " classes)");
  const int64_t flat = 64 * pooled(opt.height) * pooled(opt.width);
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(opt.channels, 32, 3));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(32, 64, 3));
  fc1_ = register_module("fc1", std::make_shared<Linear>(flat, 128));
  fc2_ = register_module("fc2", std::make_shared<Linear>(128, opt.classes));
  reset_parameters(opt.seed);
}

Tensor CNN::forward(const Tensor& x) {
  const int64_t c = opt_.channels, h = opt_.height, w = opt_.width;
  bool flat = x.dim() == 2 && x.size(1) == c * h * w;
  bool image = x.dim() == 4 && x.size(1) == c && x.size(2) == h && x.size(3) == w;
  COHORT_CHECK_ARG(flat || image, "CNN: input ", shape_str(x.shape()), " must be [N, ", c, ", ", h,
                   ", ", w, "] or [N, ", c * h * w, "]");
  Tensor y = flat ? x.reshape({x.size(0), c, h, w}) : x;
  y = ops::max_pool2d(ops::relu((*conv1_)(y)), 2);  // [N, 32, 13, 13] for 28x28
  y = ops::max_pool2d(ops::relu((*conv2_)(y)), 2);  // [N, 64, 5, 5]
  y = ops::relu((*fc1_)(y.flatten(1)));             // [N, 128]
  return (*fc2_)(y);                                // [N, classes]
}

}  // namespace cohort::nn
