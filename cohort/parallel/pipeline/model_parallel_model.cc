// The "model_parallel" strategy's keys, registration and the model each rank builds.
#include <algorithm>
#include <chrono>

#include "cohort/parallel/builtin_strategies.h"
#include "cohort/parallel/pipeline/model_parallel_strategy.h"
#include "cohort/parallel/tensor/tensor_parallel.h"

namespace cohort::parallel {
namespace {

using T = ConfigType;

void add_pipeline_keys(ConfigRegistry& r) {
  r.add({"pipeline.micro_batches",
         T::kInt,
         int64_t(4),
         "Pipeline (parallel.pp > 1): each batch is cut into this many micro-batches, which "
         "flow through the stages one after another (data.batch_size must be a multiple).",
         "",
         {},
         1.0});
  r.add({"pipeline.schedule",
         T::kString,
         std::string("1f1b"),
         "Pipeline schedule: `gpipe` (every forward, then every backward), `1f1b` (one "
         "forward, one backward: at most pp micro-batches' activations held per stage) or "
         "`interleaved` (1F1B over pipeline.chunks virtual stages per rank: a smaller bubble).",
         "",
         {"gpipe", "1f1b", "interleaved"}});
  r.add({"pipeline.chunks",
         T::kInt,
         int64_t(1),
         "Virtual stages per rank for pipeline.schedule = \"interleaved\" (Megatron-LM): the "
         "blocks are cut into pp x chunks stages, rank r holding stages r, pp + r, ...",
         "",
         {},
         1.0});
  r.add({"pipeline.recompute", T::kBool, false,
         "Keep only each stage's input per micro-batch and recompute its forward before the "
         "backward (activation checkpointing: less memory, one more forward)."});
  r.add({"pipeline.balance",
         T::kString,
         std::string("parameters"),
         "How blocks are assigned to stages when pipeline.layers is empty: `parameters` "
         "(balance parameter counts) or `time` (balance forward+backward times measured on "
         "this machine at start-up, rank 0's measurement deciding).",
         "",
         {"parameters", "time"}});
  r.add({"pipeline.layers",
         T::kIntList,
         std::vector<int64_t>{},
         "Blocks per pipeline stage, e.g. [1, 3] (empty: balanced by pipeline.balance); must "
         "sum to model.n_layer.",
         "",
         {},
         1.0});
  r.add({"pipeline.stage_delay_ms",
         T::kFloat,
         0.0,
         "Test and benchmark seam: each stage's forward of a micro-batch also sleeps this long "
         "and its backward twice as long, so that stage times are uniform (bubble bench).",
         "",
         {},
         0.0});
}

GptCosts costs_from(const nn::GptOptions& o, const DeviceMesh& mesh, const Config& cfg,
                    int64_t micro_batch) {
  if (cfg.get_string("pipeline.balance") == "parameters") return gpt_parameter_costs(o);
  GptCosts c;
  if (mesh.world->rank() == 0) c = gpt_measured_costs(o, micro_batch);
  double v[3] = {c.embedding, c.block, c.head};
  mesh.world->broadcast({.buffer = v, .count = 3, .dtype = comm::DType::f64});
  return {v[0], v[1], v[2]};
}

// pipeline.chunks, checked against the schedule: only the interleaved one runs several.
int chunks_per_rank(const Config& cfg, int pp) {
  const int chunks = int(cfg.get_int("pipeline.chunks"));
  const bool interleaved = cfg.get_string("pipeline.schedule") == "interleaved";
  COHORT_CHECK_ARG(interleaved == (chunks > 1) || pp == 1, "config: pipeline.schedule = \"",
                   cfg.get_string("pipeline.schedule"), "\" with pipeline.chunks = ", chunks,
                   interleaved ? ": the interleaved schedule needs pipeline.chunks >= 2"
                               : ": several chunks per rank need pipeline.schedule = "
                                 "\"interleaved\"");
  return pp == 1 ? 1 : chunks;
}

}  // namespace

ModelParallelOptions model_parallel_options_from(const Config& cfg) {
  ModelParallelOptions o;
  o.micro_batches = int(cfg.get_int("pipeline.micro_batches"));
  o.pipeline.schedule = parse_pipeline_schedule(cfg.get_string("pipeline.schedule"));
  o.pipeline.recompute = cfg.get_bool("pipeline.recompute");
  o.pipeline.stage_delay_s = cfg.get_float("pipeline.stage_delay_ms") / 1000.0;
  o.pipeline.timeout = std::chrono::milliseconds(int64_t(cfg.get_float("comm.timeout_s") * 1000));
  return o;
}

std::shared_ptr<GptChunks> make_gpt_chunks(const nn::GptOptions& opt, const DeviceMesh& mesh,
                                           const Config& cfg, int64_t micro_batch) {
  check_mesh_fits_gpt(mesh.shape, opt.n_layer, opt.n_head, opt.n_embd, opt.vocab_size);
  const int chunks = chunks_per_rank(cfg, mesh.shape.pp);
  const int stages = mesh.shape.pp * chunks;  // virtual stages
  COHORT_CHECK_ARG(stages <= opt.n_layer, "config: parallel.pp (", mesh.shape.pp,
                   ") x pipeline.chunks (", chunks, ") = ", stages,
                   " virtual stages, more than model.n_layer (", opt.n_layer, ")");
  const std::vector<int64_t>& counts = cfg.get_int_list("pipeline.layers");
  std::vector<nn::GptRange> ranges;
  if (!counts.empty()) {
    COHORT_CHECK_ARG(int64_t(counts.size()) == stages, "config: pipeline.layers has ",
                     counts.size(), " entries, but there are ", stages,
                     " stages (parallel.pp x pipeline.chunks)");
    ranges = gpt_ranges_from_counts(opt.n_layer, counts);
  } else {
    ranges = balance_gpt(opt.n_layer, stages, costs_from(opt, mesh, cfg, micro_batch));
  }
  nn::GptOptions o = opt;
  if (mesh.shape.tp > 1) o.layers = std::make_shared<TensorParallelLayers>(mesh.tp);
  std::vector<std::shared_ptr<nn::GPT>> mine;
  for (int c = 0; c < chunks; ++c) {  // virtual stage c * pp + this rank's stage
    o.range = ranges[size_t(c * mesh.shape.pp + mesh.coord.pp)];
    mine.push_back(std::make_shared<nn::GPT>(o));
  }
  return std::make_shared<GptChunks>(std::move(mine));
}

StrategyRegistration model_parallel_strategy_registration() {
  return {.name = "model_parallel",
          .description =
              "a GPT split over a dp x pp x tp mesh: pipeline stages, tensor-parallel "
              "shards, data parallel over replicas (chosen when parallel.pp or "
              "parallel.tp > 1)",
          .add_keys = add_pipeline_keys,
          .make = [](const StrategyContext& ctx) -> std::unique_ptr<Strategy> {
            return std::make_unique<ModelParallelStrategy>(ctx);
          },
          .world = {.on_mesh = "model_parallel"}};
}

}  // namespace cohort::parallel
