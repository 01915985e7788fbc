#pragma once
// Parameter initialisation. Every parameter carries an Init rule; Module::reset_parameters(seed)
// fills each one from Philox with seed derive_seed(seed, full_parameter_name), so the values
// depend only on (seed, name, shape): not on thread count, construction order or rank.
//
// The rules mirror PyTorch's defaults so that accuracy matches a PyTorch run of the same model:
// Linear and Conv2d weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (what
// kaiming_uniform_(a=sqrt(5)) reduces to), LayerNorm ones/zeros, Embedding N(0, 1).
#include <cstdint>
#include <string>

#include "cohort/nn/shard.h"
#include "cohort/tensor/tensor.h"

namespace cohort::nn {

struct Init {
  enum class Kind : uint8_t { kUniform, kNormal, kConstant };
  Kind kind = Kind::kConstant;
  double a = 0.0;  // uniform: low;  normal: mean;  constant: value
  double b = 0.0;  // uniform: high; normal: std

  static Init uniform(double lo, double hi) { return {Kind::kUniform, lo, hi}; }
  static Init normal(double mean, double std) { return {Kind::kNormal, mean, std}; }
  static Init constant(double v) { return {Kind::kConstant, v, 0.0}; }
  static Init zeros() { return constant(0.0); }
  static Init ones() { return constant(1.0); }
  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's Linear/Conv2d default for weight and bias.
  static Init fan_in_uniform(int64_t fan_in);

  std::string str() const;  // "U(-0.0357, 0.0357)", "N(0, 0.02)", "const(1)"
};

namespace init {

// Fills `t` (f32, contiguous, outside the graph) in place from `rule` with Philox(seed).
// In place so that handles already held by an optimizer or DDP keep seeing the parameter.
void fill_(Tensor& t, const Init& rule, uint64_t seed);
// Fills a shard (shard.h) with exactly its elements of what fill_ would draw for the full
// tensor: element i of the full tensor is Philox draw i, wherever it lives.
void fill_shard_(Tensor& t, const Init& rule, uint64_t seed, const ShardSpec& spec);

// The seed a parameter named `full_name` gets under model seed `seed`.
uint64_t param_seed(uint64_t seed, const std::string& full_name);

}  // namespace init
}  // namespace cohort::nn
