#include "cohort/nn/init.h"

#include <cmath>
#include <sstream>

#include "cohort/autograd/node.h"
#include "cohort/core/rng.h"

namespace cohort::nn {

Init Init::fan_in_uniform(int64_t fan_in) {
  COHORT_CHECK_ARG(fan_in > 0, "fan_in_uniform: fan_in must be positive, got ", fan_in);
  double bound = 1.0 / std::sqrt(double(fan_in));
  return uniform(-bound, bound);
}

std::string Init::str() const {
  std::ostringstream os;
  switch (kind) {
    case Kind::kUniform:
      os << "U(" << a << ", " << b << ")";
      break;
    case Kind::kNormal:
      os << "N(" << a << ", " << b << ")";
      break;
    case Kind::kConstant:
      os << "const(" << a << ")";
      break;
  }
  return os.str();
}

namespace init {

uint64_t param_seed(uint64_t seed, const std::string& full_name) {
  return derive_seed(seed, full_name.c_str());
}

void fill_(Tensor& t, const Init& rule, uint64_t seed) {
  COHORT_CHECK_ARG(t.dtype() == DType::f32 && t.is_contiguous(),
                   "init: expected a contiguous float32 tensor, got ", t.str());
  autograd::NoGradGuard no_grad;
  switch (rule.kind) {
    case Init::Kind::kConstant:
      t.fill_(rule.a);
      return;
    case Init::Kind::kUniform:
      COHORT_CHECK_ARG(rule.a <= rule.b, "init: uniform bounds reversed: ", rule.str());
      t.copy_(uniform(t.shape(), rule.a, rule.b, seed));
      return;
    case Init::Kind::kNormal: {
      COHORT_CHECK_ARG(rule.b >= 0, "init: negative std in ", rule.str());
      Tensor z = randn(t.shape(), seed);
      const float* src = z.data<float>();
      float* dst = t.data<float>();
      float mean = float(rule.a), std = float(rule.b);
      for (int64_t i = 0; i < t.numel(); ++i) dst[i] = mean + std * src[i];
      return;
    }
  }
}

void fill_shard_(Tensor& t, const Init& rule, uint64_t seed, const ShardSpec& spec) {
  if (!spec.sharded() || rule.kind == Init::Kind::kConstant) return fill_(t, rule, seed);
  COHORT_CHECK_ARG(t.dtype() == DType::f32 && t.is_contiguous(),
                   "init: expected a contiguous float32 tensor, got ", t.str());
  COHORT_CHECK_ARG(rule.kind != Init::Kind::kUniform || rule.a <= rule.b,
                   "init: uniform bounds reversed: ", rule.str());
  COHORT_CHECK_ARG(rule.kind != Init::Kind::kNormal || rule.b >= 0, "init: negative std in ",
                   rule.str());
  autograd::NoGradGuard no_grad;
  const std::vector<int64_t> at = full_indices(t.shape(), spec);
  Philox g(seed);
  float* dst = t.data<float>();
  // The same float arithmetic as fill_ (tensor.cc's uniform, randn then mean + std * z).
  const float a = float(rule.a), w = float(rule.b - rule.a), std = float(rule.b);
  for (size_t i = 0; i < at.size(); ++i) {
    const uint64_t k = uint64_t(at[i]);
    dst[i] = rule.kind == Init::Kind::kUniform ? a + w * g.uniform(k) : a + std * g.normal(k);
  }
}

}  // namespace init
}  // namespace cohort::nn
