// A program built outside cohort's tree against the installed package (find_package(cohort)
// or pkg-config): DDP training of an MLP on a synthetic data set, one process per rank.
//
//   cohort run -n 2 -- ./ddp_app [epochs]
//
// Each rank trains on its own shard (DistributedSampler); DDP averages the gradients, so every
// rank ends with the same parameters. Rank 0 prints the loss per epoch and, at the end, the
// accuracy over the whole data set; every rank prints a checksum of its parameters.
#include <cstdio>
#include <cstdlib>

#include "cohort/autograd/node.h"
#include "cohort/comm/init.h"
#include "cohort/core/version.h"
#include "cohort/data/loader.h"
#include "cohort/data/synthetic.h"
#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/ops/ops.h"
#include "cohort/optim/sgd.h"
#include "cohort/parallel/ddp/ddp.h"

using namespace cohort;

double accuracy(nn::Module& model, const data::Synthetic& set) {
  autograd::NoGradGuard no_grad;
  data::Loader all(set, {.batch = 256});
  int64_t correct = 0;
  for (auto& b : all) {
    auto pred = ops::argmax(model(b.x), 1).to_vector<int64_t>();
    auto y = b.y.to_vector<int64_t>();
    for (size_t i = 0; i < y.size(); ++i) correct += pred[i] == y[i];
  }
  return double(correct) / double(set.size());
}

int main(int argc, char** argv) try {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 3;
  auto world = cohort::init();  // from `cohort run` (or torchrun, mpirun, SLURM); alone: 1 rank
  data::Synthetic set(
      {.num_samples = 4096, .shape = {32}, .num_classes = 4, .seed = 1, .noise = 3.0f});
  nn::MLP model({32, 64, 4}, {.seed = 0});
  parallel::DDP ddp(model, world->group);  // rank 0's parameters everywhere; hooks the grads
  optim::SGD opt(model.named_parameters(), {.lr = 0.05, .momentum = 0.9});
  data::Loader loader(set,
                      {.batch = 64, .sampler = data::DistributedSampler(world->rank, world->size)});
  if (world->rank == 0) {
    std::printf("cohort %s: %d rank(s), %ld parameters\n", cohort::version(), world->size,
                long(model.num_parameters()));
  }
  for (int epoch = 0; epoch < epochs; ++epoch) {
    double sum = 0;
    int64_t steps = 0;
    for (auto& batch : loader) {
      Tensor loss = nn::cross_entropy(ddp(batch.x), batch.y);
      opt.zero_grad();
      loss.backward();  // the allreduce of each bucket overlaps the rest of backward
      opt.step();
      sum += loss.item<float>();
      ++steps;
    }
    if (world->rank == 0) std::printf("epoch %d: loss %.4f\n", epoch + 1, sum / double(steps));
  }
  double checksum = 0;
  for (auto& [name, p] : model.named_parameters()) {
    for (float v : p.to_vector<float>()) checksum += double(v);
  }
  std::printf("rank %d: parameter checksum %.9g\n", world->rank, checksum);
  if (world->rank == 0) std::printf("accuracy %.4f\n", accuracy(model, set));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "ddp_app: %s\n", e.what());
  return 1;
}
