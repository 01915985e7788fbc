#include "cohort/data/synthetic.h"

#include <cstring>

#include "cohort/core/rng.h"
#include "cohort/core/thread_pool.h"

namespace cohort::data {

Synthetic::Synthetic(const SyntheticOptions& o)
    : shape_(o.shape), num_samples_(o.num_samples), num_classes_(o.num_classes) {
  COHORT_CHECK_ARG(o.num_samples >= 0, "Synthetic: num_samples ", o.num_samples, " must be >= 0");
  COHORT_CHECK_ARG(o.num_classes >= 1, "Synthetic: num_classes ", o.num_classes, " must be >= 1");
  for (int64_t d : o.shape) {
    COHORT_CHECK_ARG(d >= 1, "Synthetic: shape ", shape_str(o.shape), " has a dimension < 1");
  }
  features_ = shape_numel(o.shape);
  const int64_t f = features_;
  const Philox centres(derive_seed(o.seed, "synthetic/centres"));
  const Philox labels(derive_seed(o.seed, "synthetic/labels"));
  const Philox noise(derive_seed(o.seed, "synthetic/noise"));
  auto data = std::make_shared<Data>();
  data->x.resize(size_t(o.num_samples * f));
  data->y.resize(size_t(o.num_samples));
  // Every value depends only on its counter, so the chunking of parallel_for changes nothing.
  parallel_for(0, o.num_samples, std::max<int64_t>(1, 65536 / f), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      Philox::Block r = labels.block(uint64_t(i));
      uint64_t u = (uint64_t(r[1]) << 32) | r[0];
      int64_t c = int64_t((static_cast<unsigned __int128>(u) * uint64_t(o.num_classes)) >> 64);
      data->y[size_t(i)] = c;
      float* x = data->x.data() + i * f;
      for (int64_t j = 0; j < f; ++j) {
        x[j] = o.separation * centres.normal(uint64_t(c * f + j)) +
               o.noise * noise.normal(uint64_t(i * f + j));
      }
    }
  });
  data_ = std::move(data);
}

Batch Synthetic::get_batch(std::span<const int64_t> indices) const {
  check_batch_indices(indices, num_samples_, "Synthetic");
  const int64_t b = int64_t(indices.size());
  Shape xs{b};
  xs.insert(xs.end(), shape_.begin(), shape_.end());
  Batch out{empty(xs, DType::f32), empty({b}, DType::i64)};
  float* x = out.x.data<float>();
  int64_t* y = out.y.data<int64_t>();
  for (int64_t k = 0; k < b; ++k) {
    const int64_t i = indices[size_t(k)];
    std::memcpy(x + k * features_, data_->x.data() + i * features_, size_t(features_) * 4);
    y[k] = data_->y[size_t(i)];
  }
  return out;
}

}  // namespace cohort::data
