// Unsharded state from a tensor-parallel model and back: checkpoints store the unsharded
// tensors, so they load into any number of shards (or none).
#include "cohort/autograd/node.h"
#include "cohort/core/error.h"
#include "cohort/parallel/tensor/tensor_parallel.h"

namespace cohort::parallel {
namespace {

// Every rank's piece of `local` (all of one shape), in rank order.
std::vector<Tensor> allgather_pieces(const Tensor& local, comm::ProcessGroup& tp) {
  const int64_t c = tp.size(), n = local.numel();
  Tensor in = local.detach().contiguous_raw();
  Tensor buf = empty({c * n});
  if (n > 0)
    tp.allgather({.input = in.data<float>(), .output = buf.data<float>(), .count = size_t(n)});
  std::vector<Tensor> pieces;
  for (int64_t k = 0; k < c; ++k)
    pieces.push_back(buf.slice(0, k * n, (k + 1) * n).reshape(local.shape()));
  return pieces;
}

}  // namespace

nn::StateDict gather_full(const nn::NamedTensors& named, const nn::Module& m,
                          comm::ProcessGroup& tp) {
  autograd::NoGradGuard no_grad;
  const std::map<std::string, nn::ShardSpec> specs = m.shard_specs();
  nn::StateDict out;
  for (const auto& [name, t] : named) out[name] = t;
  // By name (a std::map): the same allgather order on every rank.
  for (const auto& [name, spec] : specs) {
    auto it = out.find(name);
    COHORT_CHECK_ARG(it != out.end(), "gather_full: sharded parameter '", name,
                     "' is not among the tensors given");
    COHORT_CHECK_ARG(spec.shards == tp.size(), "gather_full: parameter '", name, "' is split in ",
                     spec.shards, " shards, the tensor-parallel group has ", tp.size(), " ranks");
    COHORT_CHECK_ARG(it->second.defined() && it->second.dtype() == DType::f32, "gather_full: '",
                     name, "' must be a defined float32 tensor");
    it->second = nn::join_shards(allgather_pieces(it->second, tp), spec);
  }
  return out;
}

nn::StateDict gather_full_state(const nn::Module& m, comm::ProcessGroup& tp) {
  nn::StateDict state = m.state_dict();
  return gather_full(nn::NamedTensors(state.begin(), state.end()), m, tp);
}

void load_full_state(nn::Module& m, const nn::StateDict& full) {
  const std::map<std::string, nn::ShardSpec> specs = m.shard_specs();
  const nn::StateDict own = m.state_dict();
  nn::StateDict local = full;
  for (const auto& [name, spec] : specs) {
    auto it = local.find(name);
    COHORT_CHECK_ARG(it != local.end(), "load_full_state: the state has no '", name, "'");
    const Shape want = nn::full_shape(own.at(name).shape(), spec);
    COHORT_CHECK_ARG(it->second.shape() == want, "load_full_state: '", name, "' is ",
                     shape_str(it->second.shape()), ", the unsharded parameter is ",
                     shape_str(want));
    it->second = nn::take_shard(it->second, spec);
  }
  m.load_state_dict(local);  // all-or-nothing: names and shapes checked before any write
}

int64_t sharded_parameter_bytes(const nn::Module& m) {
  const std::map<std::string, nn::ShardSpec> specs = m.shard_specs();
  int64_t bytes = 0;
  for (const auto& [name, t] : m.named_parameters())
    if (specs.count(name)) bytes += int64_t(t.nbytes());
  return bytes;
}

}  // namespace cohort::parallel
