// The "model_parallel" strategy's step: micro-batches through the pipeline, gradients averaged
// over dp, clipping over every stage and shard, evaluation, metrics. Checkpoints:
// model_parallel_checkpoint.cc; building the model: model_parallel_model.cc.
#include "cohort/parallel/pipeline/model_parallel_strategy.h"
#include "cohort/core/clock.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "cohort/autograd/node.h"
#include "cohort/optim/clip.h"

namespace cohort::parallel {
namespace {

using Clock = std::chrono::steady_clock;

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The model a mesh strategy trains: what make_gpt_chunks built, with its mesh.
GptChunks& chunks_of(const StrategyContext& ctx) {
  COHORT_CHECK_ARG(ctx.mesh != nullptr, "parallel.strategy = \"model_parallel\" needs a device ",
                   "mesh (parallel.dp, parallel.pp, parallel.tp)");
  auto* chunks = dynamic_cast<GptChunks*>(&ctx.model);
  COHORT_CHECK_ARG(chunks != nullptr, "parallel.strategy = \"model_parallel\" trains the GPT ",
                   "chunks make_gpt_chunks builds, not a ", ctx.model.type_name());
  return *chunks;
}

std::vector<std::shared_ptr<nn::Module>> as_modules(const GptChunks& c) {
  return {c.chunks().begin(), c.chunks().end()};
}

nlohmann::json mean_figures(int64_t steps, double total, double compute, double send, double recv,
                            double bubble) {
  const double n = double(std::max<int64_t>(steps, 1));
  return {{"compute_s", compute / n},
          {"send_wait_s", send / n},
          {"recv_wait_s", recv / n},
          {"bubble_s", bubble / n},
          {"bubble", total > 0 ? bubble / total : 0.0}};
}

}  // namespace

void ModelParallelStrategy::Sums::add(const PipelineStats& s) {
  ++steps;
  total_s += s.total_s;
  compute_s += s.compute_s;
  send_wait_s += s.send_wait_s;
  recv_wait_s += s.recv_wait_s;
  bubble_s += s.bubble_s;
}

ModelParallelStrategy::ModelParallelStrategy(const StrategyContext& ctx)
    : Strategy(ctx),
      mesh_(ctx.mesh),
      chunks_(chunks_of(ctx)),
      options_(model_parallel_options_from(ctx.config)),
      specs_(ctx.model.shard_specs()) {
  const int64_t batch = ctx.config.get_int("data.batch_size");
  COHORT_CHECK_ARG(mesh_->shape.pp == 1 || batch % options_.micro_batches == 0,
                   "config: data.batch_size = ", batch,
                   " does not divide into pipeline.micro_batches = ", options_.micro_batches);
  COHORT_CHECK_ARG(options_.pipeline.schedule != PipelineSchedule::kInterleaved1F1B ||
                       options_.micro_batches % mesh_->shape.pp == 0,
                   "config: pipeline.schedule = \"interleaved\" needs pipeline.micro_batches (",
                   options_.micro_batches, ") to be a multiple of parallel.pp (", mesh_->shape.pp,
                   ")");
  // Every rank splits alike: one group per dp index, of the pp x tp ranks that hold one replica.
  model_group_ = mesh_->world->split(mesh_->coord.dp, mesh_->world->rank());
  // Between stages travel the residual stream's activations: [b, T, C] for tokens [b, T].
  const int64_t width = chunks_.chunks().front()->options().n_embd;
  engine_ = std::make_unique<PipelineEngine>(as_modules(chunks_), mesh_->pp, options_.pipeline,
                                             [width](const Tensor& idx) {
                                               return Shape{idx.size(0), idx.size(1), width};
                                             });
  if (mesh_->shape.dp > 1)
    averager_ = std::make_unique<FlatAverager>(*mesh_->dp, "gradients", options_.pipeline.timeout);
}

// Each micro-batch of the trainer cut into pipeline.micro_batches pieces along the batch (the
// pipeline's micro-batches), each weighted by its share of the samples.
std::vector<MicroBatch> ModelParallelStrategy::cut(const std::vector<MicroBatch>& micro) const {
  const int64_t m = mesh_->shape.pp > 1 ? options_.micro_batches : 1;
  std::vector<MicroBatch> out;
  for (const MicroBatch& b : micro) {
    const int64_t n = b.x.size(0);
    COHORT_CHECK_ARG(n % m == 0, "config: a batch of ", n,
                     " samples does not divide into pipeline.micro_batches = ", m,
                     " (choose data.batch_size as a multiple of it)");
    for (int64_t k = 0; k < m; ++k)
      out.push_back({b.x.slice(0, k * n / m, (k + 1) * n / m),
                     b.y.slice(0, k * n / m, (k + 1) * n / m), b.weight / double(m)});
  }
  return out;
}

ForwardBackwardResult ModelParallelStrategy::forward_backward(const std::vector<MicroBatch>& micro,
                                                              const LossFn& /*loss*/) {
  auto t0 = Clock::now();
  std::vector<PipelineMicroBatch> parts;
  for (const MicroBatch& b : cut(micro)) parts.push_back({b.x, b.y, b.weight});
  last_micro_batches_ = int64_t(parts.size());
  const uint64_t tp_sent = mesh_->tp->bytes_sent(), tp_received = mesh_->tp->bytes_received();
  nn::GptLayers& layers = chunks_.chunks().back()->layers();
  ForwardBackwardResult r;
  r.loss = engine_->forward_backward(parts, [&layers](const Tensor& out, const Tensor& y) {
    return layers.cross_entropy(out, y);
  });
  const PipelineStats& ps = engine_->last_stats();
  interval_.add(ps);
  run_.add(ps);
  peak_activation_bytes_ = std::max(peak_activation_bytes_, ps.peak_activation_bytes);
  auto t1 = Clock::now();
  stats_ = {};
  stats_.comm_s = stats_.exposed_s = ps.send_wait_s + ps.recv_wait_s;
  // The pipeline's messages and the tensor-parallel collectives inside forward and backward
  // (their time counts as compute: it cannot be told apart from the layers').
  stats_.bytes_sent = ps.bytes_sent + (mesh_->tp->bytes_sent() - tp_sent);
  stats_.bytes_received = ps.bytes_received + (mesh_->tp->bytes_received() - tp_received);
  if (averager_) {
    std::vector<Tensor> grads;
    for (const auto& [name, p] : optimizer_.params())
      if (p.grad().defined()) grads.push_back(p.grad());
    FlatAverageStats a = averager_->average(grads);
    stats_.comm_s += a.seconds;
    stats_.exposed_s += a.seconds;
    stats_.bytes_sent += a.bytes_sent;
    stats_.bytes_received += a.bytes_received;
  }
  // Forward and backward interleave in a pipeline: the compute is reported as backward.
  r.forward_s = 0;
  r.backward_s = seconds_since(t0);
  r.phases.push_back({"pipeline", t0, t1});
  if (averager_) r.phases.push_back({"dp allreduce", t1, Clock::now()});
  return r;
}

Tensor ModelParallelStrategy::eval_forward(const Tensor& x) {
  Tensor out = engine_->forward_only(x);
  const nn::GPT& last = *chunks_.chunks().back();
  const int64_t vocab = last.options().vocab_size;
  if (mesh_->pp && mesh_->shape.pp > 1) {
    // The last stage's logits, whole, to every stage (rank 0 reports the evaluation).
    const bool is_last = mesh_->coord.pp == mesh_->shape.pp - 1;
    Tensor full = is_last ? last.layers().full_logits(out).contiguous()
                          : empty({x.size(0), x.size(1), vocab});
    mesh_->pp->broadcast({.buffer = full.data<float>(),
                          .count = size_t(full.numel()),
                          .root = mesh_->shape.pp - 1,
                          .timeout = options_.pipeline.timeout});
    return full;
  }
  return last.layers().full_logits(out);
}

// The global norm over every stage and shard: each tp-sharded parameter's piece on every tp
// rank, each replicated one (LayerNorms, row-parallel biases, wpe) once, from tp rank 0.
double ModelParallelStrategy::clip_grad_norm(double max_norm) {
  std::vector<Tensor> counted, all;
  for (const auto& [name, p] : optimizer_.params()) {
    if (!p.grad().defined()) continue;
    all.push_back(p.grad());
    if (spec_of(name) || mesh_->coord.tp == 0) counted.push_back(p);
  }
  const double local = optim::grad_norm(counted);
  double sq = local * local;
  model_group_->allreduce({.output = &sq,
                           .count = 1,
                           .dtype = comm::DType::f64,
                           .op = comm::ReduceOp::sum,
                           .timeout = options_.pipeline.timeout});
  const double total = std::sqrt(sq);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1) optim::scale_tensors(all, coef);
  return total;
}

const nn::ShardSpec* ModelParallelStrategy::spec_of(const std::string& param) const {
  auto it = specs_.find(param);
  return it == specs_.end() ? nullptr : &it->second;
}

nlohmann::json ModelParallelStrategy::take_interval_metrics() {
  const Sums& s = interval_;
  nlohmann::json j =
      mean_figures(s.steps, s.total_s, s.compute_s, s.send_wait_s, s.recv_wait_s, s.bubble_s);
  j["stage"] = mesh_->coord.pp;
  j["bubble_formula"] = engine_->last_stats().formula;
  interval_ = {};
  return {{"pipeline", j}};
}

// Collective: every stage's bubble over the run, to every rank, for the summary rank 0 writes.
void ModelParallelStrategy::finish_training() {
  const Sums& s = run_;
  std::vector<double> mine{s.total_s > 0 ? s.bubble_s / s.total_s : 0.0,
                           s.compute_s / double(std::max<int64_t>(s.steps, 1)),
                           double(peak_activation_bytes_)};
  const int world = mesh_->world->size();
  std::vector<double> all(mine.size() * size_t(world));
  mesh_->world->allgather({.input = mine.data(),
                           .output = all.data(),
                           .count = mine.size(),
                           .dtype = comm::DType::f64,
                           .timeout = options_.pipeline.timeout});
  nlohmann::json stages = nlohmann::json::array();
  for (int p = 0; p < mesh_->shape.pp; ++p) {
    const size_t r = size_t(mesh_rank(mesh_->shape, {0, p, 0})) * mine.size();
    stages.push_back({{"stage", p},
                      {"bubble", all[r]},
                      {"compute_s", all[r + 1]},
                      {"peak_activation_bytes", int64_t(all[r + 2])}});
  }
  double mean = 0;
  for (const auto& st : stages) mean += st["bubble"].get<double>();
  summary_ = {
      {"pipeline_stages", stages},
      {"pipeline_bubble", mean / double(mesh_->shape.pp)},
      {"pipeline_bubble_formula", engine_->last_stats().formula},
      {"mesh", {{"dp", mesh_->shape.dp}, {"pp", mesh_->shape.pp}, {"tp", mesh_->shape.tp}}}};
}

std::string ModelParallelStrategy::summary_line() const {
  if (!summary_.contains("pipeline_stages")) return "";
  std::string stages;
  for (const auto& st : summary_["pipeline_stages"])
    stages += detail::str(stages.empty() ? "" : ", ", "stage ", st["stage"].get<int>(), " ",
                          fixed(100 * st["bubble"].get<double>(), 1), "%");
  const MeshShape& m = mesh_->shape;
  std::string line = detail::str("mesh: dp ", m.dp, " x pp ", m.pp, " x tp ", m.tp);
  if (m.pp == 1) return line;
  return detail::str(line, "; pipeline ", pipeline_schedule_name(options_.pipeline.schedule), ", ",
                     last_micro_batches_, " micro-batches: bubble ",
                     fixed(100 * summary_["pipeline_bubble"].get<double>(), 1), "% measured (",
                     stages, "), (p-1)/(m+p-1) = ",
                     fixed(100 * summary_["pipeline_bubble_formula"].get<double>(), 1), "%");
}

}  // namespace cohort::parallel
