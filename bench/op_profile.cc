// Per-op profile of the benchmark models: the forward and the backward of every op of one MLP
// and one CNN training step, each timed alone on the step's exact shapes (batch 64), plus the
// SGD step. bench/torch_op_profile.py times the same ops the same way in PyTorch, so the two
// tables say which op, forward or backward, makes the difference.
//
//   op_profile [--model mlp|cnn|all] [--reps N] [--batch B] [--denormals flush|keep]
//
// Times are medians over reps of process CPU time (steady on a shared machine). A backward time
// is the op's backward node alone (grad_fn->apply: the kernels and their allocations); storing
// parameter gradients into fresh .grad buffers (AccumulateGrad after zero_grad(set_to_none)) is
// timed on its own row. The first layer's backward computes no input gradient, as in training.
#include <xmmintrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "cohort/autograd/node.h"
#include "cohort/core/thread_pool.h"
#include "cohort/ops/ops.h"
#include "cohort/optim/sgd.h"

namespace {

using cohort::Shape;
using cohort::Tensor;
namespace ops = cohort::ops;

double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

uint64_t g_seed = 1;

// A tensor of small random values; a leaf that requires grad when `grad`.
Tensor param(const Shape& shape, bool grad = true) {
  Tensor t = ops::mul_scalar(cohort::randn(shape, g_seed++), 0.05);
  t.set_requires_grad(grad);
  return t;
}

// One op of a step: its inputs (leaves) and how to apply it.
struct Op {
  std::string name;
  std::vector<Tensor> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
};

// Median CPU ms of the forward alone and of the backward node alone.
void profile(const Op& op, int reps, double& fwd_total, double& bwd_total) {
  std::vector<double> fwd, bwd;
  Tensor g;
  for (int r = -3; r < reps; ++r) {  // 3 untimed rounds fill the caching allocator
    double t0 = cpu_now();
    Tensor y = op.fn(op.inputs);
    double t1 = cpu_now();
    if (!g.defined())
      g = y.dim() == 0 ? cohort::ones({}) : ops::mul_scalar(cohort::randn(y.shape(), 7), 0.01);
    std::vector<Tensor> grads{g};
    cohort::autograd::NoGradGuard no_grad;  // as the engine runs it
    double t2 = cpu_now();
    std::vector<Tensor> out = y.grad_fn()->apply(std::move(grads));
    double t3 = cpu_now();
    if (r >= 0) {
      fwd.push_back((t1 - t0) * 1e3);
      bwd.push_back((t3 - t2) * 1e3);
    }
  }
  const double f = median(fwd), b = median(bwd);
  fwd_total += f;
  bwd_total += b;
  std::printf("%-34s %9.3f %9.3f\n", op.name.c_str(), f, b);
}

// Median CPU ms of storing fresh gradients for parameters of these shapes (what AccumulateGrad
// does after zero_grad(set_to_none): a copy into a new buffer) and of one SGD (momentum 0.9) step.
void profile_params(const std::vector<Shape>& shapes, int reps) {
  std::vector<Tensor> params;
  for (const Shape& s : shapes) {
    params.push_back(param(s));
    params.back().set_grad(param(s, false));
  }
  std::vector<double> t;
  for (int r = -3; r < reps; ++r) {
    double t0 = cpu_now();
    for (const Tensor& p : params) {
      Tensor g = p.grad().clone_raw();
      (void)g;
    }
    if (r >= 0) t.push_back((cpu_now() - t0) * 1e3);
  }
  std::printf("%-34s %9s %9.3f\n", "param grads into fresh .grad", "", median(t));
  cohort::optim::SGD opt(params, {.lr = 0.01, .momentum = 0.9});
  t.clear();
  for (int r = -3; r < reps; ++r) {
    double t0 = cpu_now();
    opt.step();
    if (r >= 0) t.push_back((cpu_now() - t0) * 1e3);
  }
  std::printf("%-34s %9s %9.3f\n", "sgd step (momentum; optimizer)", "", median(t));
}

Tensor targets(int64_t b) {
  std::vector<int64_t> y(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) y[size_t(i)] = (i * 7) % 10;
  return cohort::from_vector_i64(y, {b});
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
Fn lin() {
  return [](const std::vector<Tensor>& v) { return ops::linear(v[0], v[1], v[2]); };
}
Fn relu() {
  return [](const std::vector<Tensor>& v) { return ops::relu(v[0]); };
}
Fn conv() {
  return [](const std::vector<Tensor>& v) { return ops::conv2d(v[0], v[1], v[2]); };
}
Fn pool() {
  return [](const std::vector<Tensor>& v) { return ops::max_pool2d(v[0], 2); };
}
Fn xent(int64_t b) {
  Tensor y = targets(b);
  return [y](const std::vector<Tensor>& v) { return ops::cross_entropy(v[0], y); };
}

std::vector<Op> mlp_ops(int64_t b) {
  return {
      {"fc1 linear 784->512 (no dx)",
       {param({b, 784}, false), param({512, 784}), param({512})},
       lin()},
      {"relu [B,512]", {param({b, 512})}, relu()},
      {"fc2 linear 512->256", {param({b, 512}), param({256, 512}), param({256})}, lin()},
      {"relu [B,256]", {param({b, 256})}, relu()},
      {"fc3 linear 256->10", {param({b, 256}), param({10, 256}), param({10})}, lin()},
      {"cross_entropy [B,10]", {param({b, 10})}, xent(b)},
  };
}

std::vector<Op> cnn_ops(int64_t b) {
  return {
      {"conv1 1->32 3x3 (no dx)",
       {param({b, 1, 28, 28}, false), param({32, 1, 3, 3}), param({32})},
       conv()},
      {"relu [B,32,26,26]", {param({b, 32, 26, 26})}, relu()},
      {"maxpool2 [B,32,26,26]", {param({b, 32, 26, 26})}, pool()},
      {"conv2 32->64 3x3", {param({b, 32, 13, 13}), param({64, 32, 3, 3}), param({64})}, conv()},
      {"relu [B,64,11,11]", {param({b, 64, 11, 11})}, relu()},
      {"maxpool2 [B,64,11,11]", {param({b, 64, 11, 11})}, pool()},
      {"fc1 linear 1600->128", {param({b, 1600}), param({128, 1600}), param({128})}, lin()},
      {"relu [B,128]", {param({b, 128})}, relu()},
      {"fc2 linear 128->10", {param({b, 128}), param({10, 128}), param({10})}, lin()},
      {"cross_entropy [B,10]", {param({b, 10})}, xent(b)},
  };
}

void run(const char* model, const std::vector<Op>& op_list, const std::vector<Shape>& params,
         int reps) {
  std::printf("\ncohort %s (CPU ms, median of %d)\n%-34s %9s %9s\n", model, reps, "op", "forward",
              "backward");
  double f = 0, b = 0;
  for (const Op& op : op_list) profile(op, reps, f, b);
  profile_params(params, reps);
  std::printf("%-34s %9.3f %9.3f\n", "total (ops)", f, b);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "all";
  int reps = 30, batch = 64;
  bool flush = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    if (!std::strcmp(argv[i], "--reps")) reps = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--batch")) batch = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--denormals")) flush = std::strcmp(argv[i + 1], "keep") != 0;
  }
  if (flush) _mm_setcsr(_mm_getcsr() | _MM_FLUSH_ZERO_ON | 0x0040 /* DAZ */);
  cohort::set_num_threads(1);
  if (model == "mlp" || model == "all") {
    run("mlp", mlp_ops(batch), {{512, 784}, {512}, {256, 512}, {256}, {10, 256}, {10}}, reps);
  }
  if (model == "cnn" || model == "all") {
    run("cnn", cnn_ops(batch),
        {{32, 1, 3, 3}, {32}, {64, 32, 3, 3}, {64}, {128, 1600}, {128}, {10, 128}, {10}}, reps);
  }
  return 0;
}
