#pragma once
// The optimizers' element updates on float32 arrays: the loops optim/ runs over every
// parameter (split over the intra-op pool there), and the reference the GPU's fused optimizers
// (kernels/cuda/optim.h) are checked against. The float operations and their order are torch's
// single-tensor AdamW and SGD; the scalars are computed once per step, in double, by optim/.
#include <cstdint>

namespace cohort::cpu {

// AdamW: lerp for m, mul + addcmul for v, addcdiv for p (torch's order).
struct AdamScalars {
  float decay;         // 1 - lr * weight_decay
  float one_minus_b1;  // lerp weight for m
  float b2, one_minus_b2;
  float bc2_sqrt;  // sqrt(1 - beta2^t)
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^t)
};

// p, g, m, v [n]: one fused pass over the four arrays.
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamScalars& s);

// One parameter of a list the device updates in one launch (dispatch/kernel_table.h).
struct AdamWParam {
  float* p;
  const float* g;
  float* m;
  float* v;
  int64_t n;
};

struct SgdScalars {
  float lr, wd, momentum, one_minus_dampening;
};

// Which loop an SGD step runs: no momentum; a parameter's first momentum step (the buffer
// starts as the gradient); every later one.
enum class SgdPhase : uint8_t { kPlain, kFirst, kMomentum };

// p, g, buf [n] (buf unused by kPlain): p -= lr * update, as sgd.cc's three loops.
void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s,
                SgdPhase phase, bool nesterov);

struct SgdParam {
  float* p;
  const float* g;
  float* buf;  // null for kPlain
  int64_t n;
};

}  // namespace cohort::cpu
