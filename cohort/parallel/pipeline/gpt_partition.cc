#include "cohort/parallel/pipeline/gpt_partition.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>

#include "cohort/nn/layers.h"
#include "cohort/ops/ops.h"
#include "cohort/tensor/tensor.h"

namespace cohort::parallel {
namespace {

// The cost of a stage holding blocks [begin, end) of n.
double range_cost(const GptCosts& c, int64_t begin, int64_t end, int64_t n) {
  return double(end - begin) * c.block + (begin == 0 ? c.embedding : 0) + (end == n ? c.head : 0);
}

double seconds_of(const std::function<void()>& run) {
  std::vector<double> times;
  for (int i = 0; i < 3; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[1];
}

}  // namespace

GptCosts gpt_parameter_costs(const nn::GptOptions& o) {
  const double C = double(o.n_embd), V = double(o.vocab_size);
  return {.embedding = V * C + double(o.block_size) * C,
          .block = 12 * C * C + 13 * C,  // qkv, proj, fc, proj with biases; two LayerNorms
          .head = C * V + 2 * C};
}

GptCosts gpt_measured_costs(const nn::GptOptions& opt, int64_t batch) {
  nn::GptOptions o = opt;
  o.layers = nullptr;
  o.n_layer = 2;  // a first stage (embeddings, block 0) and a last one (block 1, head)
  nn::GptOptions first = o, last = o;
  first.range = {0, 1};
  last.range = {1, 2};
  nn::GPT a(first), b(last);
  Tensor idx = zeros({batch, o.block_size}, DType::i64);
  Tensor act = randn({batch, o.block_size, o.n_embd}, 1);
  act.set_requires_grad(true);
  const double embed_and_block = seconds_of([&] { ops::sum(a(idx)).backward(); });
  const double block_and_head = seconds_of([&] { ops::sum(b(act)).backward(); });
  nn::GptBlock block(o);
  const double one_block = seconds_of([&] { ops::sum(block(act)).backward(); });
  return {.embedding = std::max(0.0, embed_and_block - one_block),
          .block = one_block,
          .head = std::max(0.0, block_and_head - one_block)};
}

std::vector<nn::GptRange> balance_gpt(int64_t n, int stages, const GptCosts& costs) {
  COHORT_CHECK_ARG(stages >= 1 && stages <= n, "parallel.pp (", stages,
                   ") must be between 1 and model.n_layer (", n,
                   "): each pipeline stage needs at least one layer");
  // best[s][i]: over splits of blocks [0, i) into s stages, the smallest (largest stage cost,
  // sum of squared stage costs): the second breaks ties towards even stages. cut[s][i]: where
  // the last of those s stages starts.
  using Score = std::pair<double, double>;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<Score>> best(size_t(stages) + 1,
                                       std::vector<Score>(size_t(n) + 1, Score{inf, inf}));
  std::vector<std::vector<int64_t>> cut(size_t(stages) + 1, std::vector<int64_t>(size_t(n) + 1, 0));
  best[0][0] = {0, 0};
  for (int s = 1; s <= stages; ++s)
    for (int64_t i = s; i <= n; ++i)
      for (int64_t j = s - 1; j < i; ++j) {
        const Score& before = best[size_t(s - 1)][size_t(j)];
        const double c = range_cost(costs, j, i, n);
        const Score score{std::max(before.first, c), before.second + c * c};
        if (score < best[size_t(s)][size_t(i)]) {
          best[size_t(s)][size_t(i)] = score;
          cut[size_t(s)][size_t(i)] = j;
        }
      }
  std::vector<nn::GptRange> out(static_cast<size_t>(stages));
  for (int64_t s = stages, end = n; s >= 1; --s) {
    const int64_t begin = cut[size_t(s)][size_t(end)];
    out[size_t(s - 1)] = {begin, end};
    end = begin;
  }
  return out;
}

std::vector<nn::GptRange> gpt_ranges_from_counts(int64_t n, const std::vector<int64_t>& counts) {
  int64_t sum = 0;
  for (int64_t c : counts) {
    COHORT_CHECK_ARG(c >= 1, "config: pipeline.layers must give every stage at least one ",
                     "layer, got ", c);
    sum += c;
  }
  COHORT_CHECK_ARG(sum == n, "config: pipeline.layers sums to ", sum,
                   " layers, but model.n_layer is ", n);
  std::vector<nn::GptRange> out;
  int64_t begin = 0;
  for (int64_t c : counts) {
    out.push_back({begin, begin + c});
    begin += c;
  }
  return out;
}

GptChunks::GptChunks(std::vector<std::shared_ptr<nn::GPT>> chunks) : chunks_(std::move(chunks)) {
  COHORT_CHECK_ARG(!chunks_.empty(), "GptChunks: no chunk");
  std::shared_ptr<nn::Sequential> blocks;
  for (const auto& chunk : chunks_)
    for (const auto& [name, child] : chunk->named_children()) {
      if (name != "blocks") {
        register_module(name, child);
        continue;
      }
      if (!blocks) blocks = register_module("blocks", std::make_shared<nn::Sequential>());
      for (const auto& [index, block] : child->named_children()) blocks->push_back(index, block);
    }
}

Tensor GptChunks::forward(const Tensor& x) {
  COHORT_CHECK_ARG(chunks_.size() == 1, "GptChunks: ", chunks_.size(),
                   " chunks run through a pipeline, not one forward");
  return (*chunks_[0])(x);
}

}  // namespace cohort::parallel
