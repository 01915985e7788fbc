#include "cohort/nn/models/cnn.h"

#include "cohort/ops/ops.h"

namespace cohort::nn {

CNN::CNN(CnnOptions opt) {
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(1, 32, 3));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(32, 64, 3));
  fc1_ = register_module("fc1", std::make_shared<Linear>(64 * 5 * 5, 128));
  fc2_ = register_module("fc2", std::make_shared<Linear>(128, kClasses));
  reset_parameters(opt.seed);
}

Tensor CNN::forward(const Tensor& x) {
  const int64_t pixels = kImage * kImage;
  bool flat = x.dim() == 2 && x.size(1) == pixels;
  bool image = x.dim() == 4 && x.size(1) == 1 && x.size(2) == kImage && x.size(3) == kImage;
  COHORT_CHECK_ARG(flat || image, "CNN: input ", shape_str(x.shape()), " must be [N, 1, ", kImage,
                   ", ", kImage, "] or [N, ", pixels, "]");
  Tensor h = flat ? x.reshape({x.size(0), 1, kImage, kImage}) : x;
  h = ops::max_pool2d(ops::relu((*conv1_)(h)), 2);  // [N, 32, 13, 13]
  h = ops::max_pool2d(ops::relu((*conv2_)(h)), 2);  // [N, 64, 5, 5]
  h = ops::relu((*fc1_)(h.flatten(1)));             // [N, 128]
  return (*fc2_)(h);                                // [N, 10]
}

}  // namespace cohort::nn
