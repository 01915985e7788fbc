#include "cohort/nn/blocks.h"

#include "cohort/autograd/node.h"
#include "cohort/ops/ops.h"

namespace cohort::nn {

BatchNorm::BatchNorm(int64_t channels, BatchNormOptions opt) : channels_(channels), opt_(opt) {
  COHORT_CHECK_ARG(channels > 0 && opt.eps > 0 && opt.momentum >= 0 && opt.momentum <= 1,
                   "BatchNorm: invalid channels ", channels, ", eps ", opt.eps, " or momentum ",
                   opt.momentum);
  weight_ = register_parameter("weight", ones({channels}), Init::ones());
  bias_ = register_parameter("bias", zeros({channels}), Init::zeros());
  running_mean_ = register_buffer("running_mean", zeros({channels}));
  running_var_ = register_buffer("running_var", ones({channels}));
  tracked_ = register_buffer("num_batches_tracked", zeros({}, DType::i64));
}

Tensor BatchNorm::forward(const Tensor& x) {
  const bool image = x.dim() == 4;
  COHORT_CHECK_ARG((x.dim() == 2 || image) && x.size(1) == channels_, "BatchNorm(", channels_,
                   "): input ", shape_str(x.shape()), " must be [N, ", channels_, "] or [N, ",
                   channels_, ", H, W]");
  // Statistics over every dim but the channel's; [1, C] or [1, C, 1, 1] broadcast back.
  const std::vector<int64_t> dims = image ? std::vector<int64_t>{0, 2, 3} : std::vector<int64_t>{0};
  const Shape per_channel = image ? Shape{1, channels_, 1, 1} : Shape{1, channels_};
  Tensor centred, var;
  if (is_training()) {
    const int64_t n = x.numel() / channels_;
    COHORT_CHECK_ARG(n > 1, "BatchNorm(", channels_, "): training needs more than one value per ",
                     "channel, got input ", shape_str(x.shape()));
    Tensor mean = ops::mean(x, dims, true);
    centred = ops::sub(x, mean);
    var = ops::mean(ops::mul(centred, centred), dims, true);
    update_running(mean, var, n);
  } else {
    centred = ops::sub(x, running_mean_.reshape(per_channel));
    var = running_var_.reshape(per_channel);
  }
  Tensor y = ops::div(centred, ops::sqrt(ops::add_scalar(var, opt_.eps)));
  return ops::add(ops::mul(y, weight_.reshape(per_channel)), bias_.reshape(per_channel));
}

// As PyTorch: the running variance takes the unbiased batch variance (n / (n - 1)).
void BatchNorm::update_running(const Tensor& mean, const Tensor& var, int64_t per_channel) {
  autograd::NoGradGuard no_grad;
  const double m = opt_.momentum, unbias = double(per_channel) / double(per_channel - 1);
  Tensor new_mean = ops::add(ops::mul_scalar(running_mean_, 1.0 - m),
                             ops::mul_scalar(mean.detach().reshape({channels_}), m));
  Tensor new_var = ops::add(ops::mul_scalar(running_var_, 1.0 - m),
                            ops::mul_scalar(var.detach().reshape({channels_}), m * unbias));
  running_mean_.copy_(new_mean);
  running_var_.copy_(new_var);
  Tensor count = tracked_.device().is_cpu() ? tracked_ : tracked_.to(Device::cpu());
  Tensor next = zeros({}, DType::i64);
  next.data<int64_t>()[0] = count.data<int64_t>()[0] + 1;
  tracked_.copy_(next);
}

AvgPool2d::AvgPool2d(int64_t kernel) : kernel_(kernel) {
  COHORT_CHECK_ARG(kernel > 0, "AvgPool2d: kernel must be positive, got ", kernel);
}

Tensor AvgPool2d::forward(const Tensor& x) {
  const int64_t k = kernel_;
  COHORT_CHECK_ARG(x.dim() == 4 && x.size(2) >= k && x.size(3) >= k, "AvgPool2d(", k, "): input ",
                   shape_str(x.shape()), " must be [N, C, H, W] with H and W at least ", k);
  const int64_t h = x.size(2) / k, w = x.size(3) / k;
  Tensor y = x;
  if (h * k != x.size(2)) y = ops::slice(y, 2, 0, h * k);
  if (w * k != x.size(3)) y = ops::slice(y, 3, 0, w * k);
  // Each window becomes two dims of its own, averaged away.
  y = ops::reshape(ops::contiguous(y), {x.size(0), x.size(1), h, k, w, k});
  return ops::mean(y, {3, 5});
}

Tensor GlobalAvgPool2d::forward(const Tensor& x) {
  COHORT_CHECK_ARG(x.dim() == 4, "GlobalAvgPool2d: input ", shape_str(x.shape()),
                   " must be [N, C, H, W]");
  return ops::mean(x, {2, 3}, true);
}

Tensor Tanh::forward(const Tensor& x) {
  return ops::tanh(x);
}

Tensor Sigmoid::forward(const Tensor& x) {
  return ops::sigmoid(x);
}

Tensor Residual::forward(const Tensor& x) {
  Tensor y = Sequential::forward(x);
  COHORT_CHECK_ARG(y.shape() == x.shape(), "Residual: its layers turn ", shape_str(x.shape()),
                   " into ", shape_str(y.shape()), "; a residual block must keep the shape");
  return ops::add(x, y);
}

PositionEmbedding::PositionEmbedding(int64_t max_len, int64_t dim) : max_len_(max_len), dim_(dim) {
  COHORT_CHECK_ARG(max_len > 0 && dim > 0, "PositionEmbedding: invalid size ", max_len, " x ", dim);
  weight_ = register_parameter("weight", empty({max_len, dim}), Init::normal(0.0, 0.02));
  reset_parameters(0);
}

Tensor PositionEmbedding::forward(const Tensor& x) {
  COHORT_CHECK_ARG(x.dim() == 3 && x.size(1) <= max_len_ && x.size(2) == dim_, "PositionEmbedding(",
                   max_len_, ", ", dim_, "): input ", shape_str(x.shape()), " must be [B, T, ",
                   dim_, "] with T <= ", max_len_);
  return ops::add(x, ops::slice(weight_, 0, 0, x.size(1)));
}

}  // namespace cohort::nn
