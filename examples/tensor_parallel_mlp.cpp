// A model of one's own split over ranks with tensor parallelism (Megatron-LM's layers): a
// two-layer MLP whose hidden layer is divided among the ranks. The first layer is column-
// parallel (each rank computes hidden/size of the features), the second row-parallel (each
// rank multiplies its features, one allreduce sums them), so the ranks exchange one [N, 10]
// allreduce forward and one [N, 16] allreduce backward per step. Every rank sees the same
// batch and prints the same loss, which is the loss the unsplit MLP would have.
//
//   build/bin/cohort run -n 2 -- build/bin/tensor_parallel_mlp [steps]
//   build/bin/tensor_parallel_mlp                 # alone: a world of one, the whole MLP
#include <cstdio>
#include <cstdlib>

#include "cohort/comm/init.h"
#include "cohort/nn/loss.h"
#include "cohort/ops/ops.h"
#include "cohort/optim/sgd.h"
#include "cohort/parallel/tensor/tensor_parallel.h"

using namespace cohort;

constexpr int64_t kIn = 16, kHidden = 64, kClasses = 10;

// x [N, 16] -> logits [N, 10]: fc1 (column-parallel), GELU, fc2 (row-parallel).
class TpMlp : public nn::Module {
 public:
  TpMlp(const parallel::GroupPtr& group, uint64_t seed) {
    fc1_ = register_module("fc1", std::make_shared<parallel::ColumnParallelLinear>(
                                      kIn, kHidden, /*parts=*/1, /*bias=*/true, group));
    fc2_ = register_module("fc2", std::make_shared<parallel::RowParallelLinear>(
                                      kHidden, kClasses, /*bias=*/true, group));
    // Each rank fills its slice of the unsplit MLP's draw: any rank count starts alike.
    reset_parameters(seed);
  }
  Tensor forward(const Tensor& x) override { return (*fc2_)(ops::gelu((*fc1_)(x))); }
  std::string type_name() const override { return "TpMlp"; }

 private:
  std::shared_ptr<nn::Module> fc1_, fc2_;
};

// A synthetic task: the class is the argmax of a fixed random projection of x. The same batch
// on every rank (tensor parallelism splits the model, not the data).
std::pair<Tensor, Tensor> make_batch(int64_t n, uint64_t step) {
  Tensor x = randn({n, kIn}, 1000 + step);
  Tensor teacher = randn({kIn, kClasses}, 7);
  Tensor y = ops::argmax(ops::matmul(x, teacher), 1);
  return {x, y};
}

int main(int argc, char** argv) try {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 20;
  auto world = cohort::init();
  TpMlp model(world->group, /*seed=*/0);
  std::printf("rank %d of %d: %ld of the MLP's parameters (%ld bytes sharded)\n", world->rank,
              world->size, long(model.num_parameters()),
              long(parallel::sharded_parameter_bytes(model)));
  optim::SGD opt(model.named_parameters(), {.lr = 0.2, .momentum = 0.9});
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = make_batch(128, uint64_t(step));
    Tensor loss = nn::cross_entropy(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (world->rank == 0) std::printf("step %d loss %.4f\n", step, loss.item<float>());
  }
  // The whole model, joined from the pieces (what a checkpoint would store).
  nn::StateDict full = parallel::gather_full_state(model, *world->group);
  if (world->rank == 0)
    std::printf("joined fc1.weight [%ld, %ld] from %d rank(s)\n", long(full["fc1.weight"].size(0)),
                long(full["fc1.weight"].size(1)), world->size);
  return 0;
} catch (const cohort::Error& e) {
  std::fprintf(stderr, "tensor_parallel_mlp: %s\n", e.what());
  return 1;
}
