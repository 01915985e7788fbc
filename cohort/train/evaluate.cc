#include "cohort/train/evaluate.h"

#include "cohort/autograd/node.h"
#include "cohort/data/loader.h"
#include "cohort/nn/loss.h"
#include "cohort/ops/ops.h"

namespace cohort::train {

EvalResult evaluate_split(const std::function<Tensor(const Tensor&)>& forward,
                          std::shared_ptr<const data::Dataset> split, const EvalOptions& o) {
  autograd::NoGradGuard no_grad;
  data::Loader loader(std::move(split), {.batch = o.batch, .prefetch = 1});
  EvalResult r;
  double loss_sum = 0, correct = 0;
  int64_t n_batches = 0;
  for (auto& b : loader) {
    if (o.max_batches > 0 && n_batches++ >= o.max_batches) break;
    Tensor logits = forward(b.x);
    int64_t n = b.y.numel();
    loss_sum +=
        double(nn::cross_entropy(logits, b.y.to(logits.device())).item<float>()) * double(n);
    r.samples += n;
    if (!o.is_text) {  // argmax on the host: the logits of a batch are small
      std::vector<int64_t> pred = ops::argmax(logits.to(Device::cpu()), -1).to_vector<int64_t>();
      std::vector<int64_t> y = b.y.to_vector<int64_t>();
      for (size_t i = 0; i < y.size(); ++i) correct += pred[i] == y[i];
    }
  }
  r.loss = r.samples ? loss_sum / double(r.samples) : 0;
  if (!o.is_text) r.accuracy = r.samples ? correct / double(r.samples) : 0;
  return r;
}

}  // namespace cohort::train
