#pragma once
// Finite-difference gradient check for ops.
//
// For L(x) = sum(w * f(x)) with fixed random weights w, compares dL/dx from backward() with
// central differences (L(x + eps e_i) - L(x - eps e_i)) / (2 eps), for every element of every
// input that requires grad. Float32 ops, so tolerances are loose but the check is still sharp:
// a wrong backward is off by O(1), rounding by O(1e-3).
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "cohort/autograd/node.h"
#include "cohort/tensor/tensor.h"

namespace cohort::testing {

struct GradcheckOptions {
  double eps = 1e-3;
  double atol = 2e-3;
  double rtol = 2e-2;
  uint64_t seed = 1234;
};

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

inline double weighted_sum(const Tensor& out, const std::vector<float>& w) {
  std::vector<float> v = out.to_vector<float>();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += double(v[i]) * double(w[i]);
  return s;
}

// Returns true when every checked gradient element agrees; reports the first mismatches.
inline ::testing::AssertionResult gradcheck(const OpFn& f, std::vector<Tensor> inputs,
                                            GradcheckOptions opt = {}) {
  for (auto& x : inputs)
    if (x.defined() && x.dtype() == DType::f32) x.set_requires_grad(true);
  Tensor out = f(inputs);
  std::vector<float> w = uniform(out.shape(), -1.0, 1.0, opt.seed).to_vector<float>();
  out.backward(from_vector(w, out.shape()));
  int bad = 0;
  std::string report;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    Tensor g = x.grad();
    if (!g.defined()) return ::testing::AssertionFailure() << "input " << k << " got no gradient";
    std::vector<float> analytic = g.to_vector<float>();
    float* p = x.data<float>();
    autograd::NoGradGuard ng;
    for (int64_t i = 0; i < x.numel(); ++i) {
      float orig = p[i];
      p[i] = orig + float(opt.eps);
      double lp = weighted_sum(f(inputs), w);
      p[i] = orig - float(opt.eps);
      double lm = weighted_sum(f(inputs), w);
      p[i] = orig;
      double numeric = (lp - lm) / (2 * opt.eps);
      double a = analytic[size_t(i)];
      if (std::abs(a - numeric) > opt.atol + opt.rtol * std::abs(numeric)) {
        if (++bad <= 5)
          report += "\n  input " + std::to_string(k) + " element " + std::to_string(i) +
                    ": analytic " + std::to_string(a) + " numeric " + std::to_string(numeric);
      }
    }
  }
  if (bad) return ::testing::AssertionFailure() << bad << " gradient mismatches" << report;
  return ::testing::AssertionSuccess();
}

}  // namespace cohort::testing
