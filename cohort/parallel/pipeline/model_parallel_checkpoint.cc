// The "model_parallel" strategy's checkpoints: whole tensors (each stage's, joined over its tp
// group) written by the stage's dp-0, tp-0 rank; loaded by cutting what this rank holds.
#include <set>

#include <nlohmann/json.hpp>

#include "cohort/autograd/node.h"
#include "cohort/parallel/pipeline/model_parallel_strategy.h"
#include "cohort/parallel/tensor/tensor_parallel.h"

namespace cohort::parallel {
namespace {

ckpt::TensorPiece whole_piece(const std::string& section, const std::string& name,
                              const Tensor& t) {
  return {.section = section,
          .name = name,
          .global_shape = t.shape(),
          .begin = 0,
          .data = t.detach().clone_raw().reshape({t.numel()})};
}

// "<param>.<slot>" -> "<param>", for the optimizer's tensor names.
std::string param_of(const std::string& key, const std::vector<std::string>& slots) {
  for (const std::string& slot : slots) {
    const std::string suffix = "." + slot;
    if (key.size() > suffix.size() &&
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0)
      return key.substr(0, key.size() - suffix.size());
  }
  return key;
}

// Every rank's text to every rank (collective over `g`), in rank order.
std::vector<std::string> allgather_text(comm::ProcessGroup& g, const std::string& mine,
                                        std::chrono::milliseconds timeout) {
  std::vector<int64_t> sizes(size_t(g.size()));
  int64_t n = int64_t(mine.size());
  g.allgather({.input = &n,
               .output = sizes.data(),
               .count = 1,
               .dtype = comm::DType::i64,
               .timeout = timeout});
  std::vector<size_t> counts(sizes.begin(), sizes.end());
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::string all(total, '\0');
  g.allgatherv({.input = mine.data(),
                .output = all.data(),
                .counts = counts,
                .dtype = comm::DType::u8,
                .timeout = timeout});
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t c : counts) {
    out.push_back(all.substr(at, c));
    at += c;
  }
  return out;
}

}  // namespace

Tensor ModelParallelStrategy::join_over_tp(const Tensor& local, const nn::ShardSpec& spec) const {
  comm::ProcessGroup& tp = *mesh_->tp;
  Tensor mine = local.contiguous();
  Tensor all = empty({int64_t(tp.size()) * mine.numel()});
  tp.allgather({.input = mine.data<float>(),
                .output = all.data<float>(),
                .count = size_t(mine.numel()),
                .timeout = options_.pipeline.timeout});
  std::vector<Tensor> pieces;
  for (int k = 0; k < tp.size(); ++k)
    pieces.push_back(all.slice(0, k * mine.numel(), (k + 1) * mine.numel()).reshape(mine.shape()));
  return nn::join_shards(pieces, spec);
}

std::vector<ckpt::TensorPiece> ModelParallelStrategy::model_pieces() const {
  autograd::NoGradGuard no_grad;
  const nn::StateDict full = gather_full_state(model_, *mesh_->tp);  // collective over tp
  std::vector<ckpt::TensorPiece> out;
  if (!writes_stage()) return out;
  for (const auto& [name, t] : full) out.push_back(whole_piece("model", name, t));
  return out;
}

std::vector<ckpt::TensorPiece> ModelParallelStrategy::optimizer_pieces() const {
  autograd::NoGradGuard no_grad;
  const optim::OptimizerState os = optimizer_.export_state();
  std::vector<ckpt::TensorPiece> out;
  for (const auto& [key, t] : os.tensors) {  // the same keys on every tp rank
    const nn::ShardSpec* spec = spec_of(param_of(key, optimizer_.slot_names()));
    Tensor whole = spec ? join_over_tp(t, *spec) : t;
    if (writes_stage()) out.push_back(whole_piece("optimizer", key, whole));
  }
  return out;
}

// Collective over the world: each stage's step counts (from its writer) and the lr.
std::map<std::string, double> ModelParallelStrategy::optimizer_scalars() const {
  std::map<std::string, double> scalars;  // as export_state() has them, without its copies
  if (writes_stage()) {
    scalars["lr"] = optimizer_.lr();
    const optim::NamedParams& params = optimizer_.params();
    for (size_t i = 0; i < params.size(); ++i)
      if (optimizer_.step_count(i) > 0)
        scalars[params[i].first + ".step"] = double(optimizer_.step_count(i));
  }
  const std::string mine = nlohmann::json(scalars).dump();
  std::map<std::string, double> out;
  for (const std::string& text : allgather_text(*mesh_->world, mine, options_.pipeline.timeout)) {
    const nlohmann::json stage = nlohmann::json::parse(text);  // items() refers into it
    for (const auto& [k, v] : stage.items()) out[k] = v.get<double>();
  }
  return out;
}

// Collective over the world, so that every rank fails alike (a problem in one stage must not
// leave the others resumed and waiting): the checkpoint must hold exactly the tensors of every
// stage together, in shapes that fit; the first problem any rank finds is every rank's error.
void ModelParallelStrategy::load_model(const nn::StateDict& state) {
  std::string problem;
  std::vector<std::string> names;
  nn::StateDict mine;
  for (const auto& [name, t] : model_.state_dict()) {
    names.push_back(name);
    auto it = state.find(name);
    if (it != state.end()) {
      mine.emplace(name, it->second);
    } else if (problem.empty()) {
      problem = detail::str("the checkpoint has no '", name, "', which pipeline stage ",
                            mesh_->coord.pp, " holds");
    }
  }
  try {
    if (problem.empty()) load_full_state(model_, mine);  // cuts tp shards; checks shapes
  } catch (const InvalidArgument& e) {
    problem = e.what();
  }
  std::set<std::string> held;  // the whole model's names: every stage's
  for (const std::string& text :
       allgather_text(*mesh_->world, nlohmann::json(names).dump(), options_.pipeline.timeout))
    for (const auto& name : nlohmann::json::parse(text)) held.insert(name.get<std::string>());
  for (const auto& [name, t] : state)
    if (problem.empty() && !held.count(name))
      problem = detail::str("the checkpoint has '", name,
                            "', which no pipeline stage of this model holds (a checkpoint of "
                            "another model?)");
  const std::vector<std::string> problems =
      allgather_text(*mesh_->world, problem, options_.pipeline.timeout);
  for (size_t r = 0; r < problems.size(); ++r)
    COHORT_CHECK_ARG(problems[r].empty(), "rank ", r, ": ", problems[r]);
}

// Reads only this rank's tensors; the others enter load_model's check by name alone (undefined
// tensors: which tensors the checkpoint holds is all it needs of them). A checkpoint without
// one of this rank's names (an older layout, another model) goes the whole way, and
// load_model's checks say what is wrong; either way load_model runs on every rank.
void ModelParallelStrategy::load_model_from(const ckpt::ShardedView& view,
                                            const std::function<nn::StateDict()>& whole) {
  const std::vector<std::string> names = view.names("model");
  const std::set<std::string> in_view(names.begin(), names.end());
  const nn::StateDict own = model_.state_dict();
  bool all_there = true;
  for (const auto& [name, t] : own) all_there = all_there && in_view.count(name);
  if (!all_there) return load_model(whole());
  nn::StateDict state;
  for (const std::string& name : names)
    state[name] = own.count(name) ? view.full("model", name) : Tensor();
  load_model(state);
}

void ModelParallelStrategy::load_optimizer(const ckpt::ShardedView& view,
                                           const std::map<std::string, double>& scalars) {
  optim::OptimizerState os;
  for (const auto& [param, p] : optimizer_.params()) {
    for (const std::string& slot : optimizer_.slot_names()) {
      const std::string key = param + "." + slot;
      if (!view.has("optimizer", key)) continue;
      Tensor full = view.full("optimizer", key);
      const nn::ShardSpec* spec = spec_of(param);
      os.tensors[key] = spec ? nn::take_shard(full, *spec) : full;
    }
    auto step = scalars.find(param + ".step");
    if (step != scalars.end()) os.scalars.insert(*step);
  }
  if (auto lr = scalars.find("lr"); lr != scalars.end()) os.scalars.insert(*lr);
  optimizer_.import_state(os);  // names the tensor whose shape does not fit
}

CheckpointPieces ModelParallelStrategy::pieces() const {
  CheckpointPieces out;
  out.pieces = model_pieces();
  for (ckpt::TensorPiece& p : optimizer_pieces()) out.pieces.push_back(std::move(p));
  for (ckpt::TensorPiece& p : out.pieces) p.shard = group_->rank();  // never written whole
  out.optimizer_scalars = optimizer_scalars();
  return out;
}

void ModelParallelStrategy::load(const CheckpointSource& from) {
  load_model_from(from.view, from.whole_model);
  load_optimizer(from.view, from.optimizer_scalars);
}

}  // namespace cohort::parallel
