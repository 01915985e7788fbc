#pragma once
// Which layers of the GPT each pipeline stage holds, and the module a rank trains when the
// model is split over a device mesh (mesh.h): its stage's layers (GptRange), built with
// tensor-parallel layers over its tp group when tp > 1 (tensor_parallel.h). Every piece keeps
// the whole model's parameter names and initial values, so checkpoints, optimizer state and
// equivalence tests see one model however it is split.
//
// Balancing: the stages are contiguous runs of blocks, at least one each; the first also holds
// the embeddings, the last the final norm and the head. A split minimises the largest stage's
// cost, where the costs are parameter counts ("parameters") or the measured forward+backward
// time of the embeddings, one block and the head on this machine ("time"; blocks are alike, so
// one is measured), or is given explicitly as blocks per stage.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cohort/nn/models/gpt.h"
#include "cohort/parallel/mesh.h"

namespace cohort::parallel {

// The cost of a GPT's pieces, in any unit.
struct GptCosts {
  double embedding = 0, block = 0, head = 0;
};
GptCosts gpt_parameter_costs(const nn::GptOptions& o);
// Forward and backward of each piece on a [batch, block_size] batch, seconds (median of a
// few runs). Builds only those pieces, never the whole model.
GptCosts gpt_measured_costs(const nn::GptOptions& o, int64_t batch);

// `stages` contiguous ranges covering blocks [0, n_layer), minimising the largest cost (ties:
// the most even costs, by their sum of squares). InvalidArgument when stages > n_layer.
std::vector<nn::GptRange> balance_gpt(int64_t n_layer, int stages, const GptCosts& costs);
// Explicit: blocks per stage (pipeline.layers), which must be positive and sum to n_layer.
std::vector<nn::GptRange> gpt_ranges_from_counts(int64_t n_layer,
                                                 const std::vector<int64_t>& counts);

// The modules of one rank's chunks (one per virtual stage it runs) under the whole model's
// names: its parameters, buffers and state_dict are those entries of the unsplit GPT.
class GptChunks : public nn::Module {
 public:
  explicit GptChunks(std::vector<std::shared_ptr<nn::GPT>> chunks);
  // With one chunk, its forward; with several, InvalidArgument (run them through a pipeline).
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GptChunks"; }
  const std::vector<std::shared_ptr<nn::GPT>>& chunks() const { return chunks_; }

 private:
  std::vector<std::shared_ptr<nn::GPT>> chunks_;
};

}  // namespace cohort::parallel
