#include "cohort/train/checkpoint_shards.h"

#include <optional>
#include <sstream>

namespace cohort::train {
namespace {

// "<section>/<name>@<begin>@<d0>x<d1>..." ('@' and 'x' never end a tensor's name part we cut:
// the last two '@' separate the fields).
std::string piece_key(const ckpt::TensorPiece& p) {
  std::ostringstream os;
  os << p.section << "/" << p.name << "@" << p.begin << "@";
  for (size_t i = 0; i < p.global_shape.size(); ++i) os << (i ? "x" : "") << p.global_shape[i];
  return os.str();
}

// A non-negative integer, all of `text`; nullopt for anything else.
std::optional<int64_t> parse_count(const std::string& text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

ckpt::TensorPiece parse_piece_key(const std::string& key, const Tensor& data, int rank) {
  auto bad = [&] {
    return IoError(detail::str("checkpoint: rank ", rank, " sent a piece named '", key,
                               "', expected <section>/<name>@<begin>@<d0>x<d1>..."));
  };
  size_t shape_at = key.rfind('@');
  size_t slash = key.find('/');
  if (shape_at == std::string::npos || shape_at == 0 || slash == std::string::npos) throw bad();
  size_t begin_at = key.rfind('@', shape_at - 1);
  if (begin_at == std::string::npos || begin_at <= slash) throw bad();
  ckpt::TensorPiece p;
  p.section = key.substr(0, slash);
  p.name = key.substr(slash + 1, begin_at - slash - 1);
  auto begin = parse_count(key.substr(begin_at + 1, shape_at - begin_at - 1));
  if (!begin) throw bad();
  p.begin = *begin;
  const std::string dims = key.substr(shape_at + 1);
  for (size_t at = 0; !dims.empty();) {
    size_t x = dims.find('x', at);
    auto d = parse_count(dims.substr(at, x == std::string::npos ? std::string::npos : x - at));
    if (!d) throw bad();
    p.global_shape.push_back(*d);
    if (x == std::string::npos) break;
    at = x + 1;
  }
  p.data = data;
  p.shard = rank;
  return p;
}

}  // namespace

NamedTensors encode_pieces(const std::vector<ckpt::TensorPiece>& pieces) {
  NamedTensors out;
  out.reserve(pieces.size());
  for (const auto& p : pieces) out.emplace_back(piece_key(p), p.data);
  return out;
}

std::vector<ckpt::TensorPiece> decode_pieces(const NamedTensors& tensors, int rank) {
  std::vector<ckpt::TensorPiece> out;
  out.reserve(tensors.size());
  for (const auto& [key, t] : tensors) out.push_back(parse_piece_key(key, t, rank));
  return out;
}

nn::StateDict model_state_of(const ckpt::ShardedView& view) {
  nn::StateDict out;
  for (const std::string& name : view.names("model")) out[name] = view.full("model", name);
  return out;
}

std::map<std::string, Tensor> optimizer_tensors_of(const ckpt::ShardedView& view,
                                                   bool with_optimizer,
                                                   NamedTensors* strategy_tensors) {
  std::map<std::string, Tensor> out;
  for (const std::string& name : view.names("optimizer")) {
    if (name.rfind(kStrategyPrefix, 0) == 0) {
      strategy_tensors->emplace_back(name, view.full("optimizer", name));
    } else if (with_optimizer) {
      out[name] = view.full("optimizer", name);
    }
  }
  return out;
}

}  // namespace cohort::train
