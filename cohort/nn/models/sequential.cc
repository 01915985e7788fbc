#include "cohort/nn/models/sequential.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

#include "cohort/core/config.h"  // edit_distance, for "did you mean"
#include "cohort/nn/blocks.h"
#include "cohort/nn/layer_spec.h"
#include "cohort/nn/models/gpt.h"

namespace cohort::nn {
namespace {

// What flows from one layer to the next while the list is built: one sample's shape.
struct Flow {
  Shape shape;
  bool tokens = false;
  int64_t classes = 0, vocab = 0;
};

// One layer's values by name (positional ones in the order its type lists them), each read
// once; errors name the list, the layer and the shape it gets.
class LayerArgs {
 public:
  LayerArgs(const LayerSpec& spec, const std::vector<std::string>& names, const Flow& flow,
            const std::string& origin)
      : spec_(spec), flow_(flow), origin_(origin) {
    check(spec.positional.size() <= names.size(), "takes ", names.size(), " value(s) (",
          list(names), ") before its key=value options, got ", spec.positional.size());
    for (size_t i = 0; i < spec.positional.size(); ++i) values_[names[i]] = spec.positional[i];
    for (const auto& [key, value] : spec.options) {
      check(std::find(names.begin(), names.end(), key) != names.end(), "has no option `", key,
            "` (", names.empty() ? std::string("it takes none") : "it takes " + list(names), ")");
      check(values_.emplace(key, value).second, "gives `", key, "` twice");
    }
  }

  int64_t integer(const std::string& name, std::optional<int64_t> fallback, int64_t min = 1) const {
    auto it = values_.find(name);
    check(it != values_.end() || fallback.has_value(), "needs `", name, "`");
    if (it == values_.end()) return *fallback;
    int64_t v = 0;
    const std::string& s = it->second;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    check(r.ec == std::errc() && r.ptr == s.data() + s.size() && v >= min, "`", name, "` must be ",
          "an integer >= ", min, ", got `", s, "`");
    return v;
  }

  double real(const std::string& name, double fallback, double lo, double hi) const {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    double v = 0;
    const std::string& s = it->second;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    check(r.ec == std::errc() && r.ptr == s.data() + s.size() && v >= lo && v < hi, "`", name,
          "` must be a number in [", lo, ", ", hi, "), got `", s, "`");
    return v;
  }

  bool flag(const std::string& name, bool fallback) const {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    check(it->second == "true" || it->second == "false", "`", name, "` must be true or false, ",
          "got `", it->second, "`");
    return it->second == "true";
  }

  // The layer needs another input than it gets: `need` says which.
  template <typename... A>
  void input(bool ok, const A&... need) const {
    check(ok, "gets ", flow_.tokens ? "token ids " : "", shape_str(flow_.shape),
          " per sample but needs ", need...,
          flow_.tokens ? " (token ids go through `embedding` first)" : "");
  }

  template <typename... A>
  void check(bool ok, const A&... what) const {
    COHORT_CHECK_ARG(ok, origin_, ": ", describe(spec_), " ", what...);
  }

 private:
  static std::string list(const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
  }
  const LayerSpec& spec_;
  const Flow& flow_;
  const std::string& origin_;
  std::map<std::string, std::string> values_;
};

using ModulePtr = std::shared_ptr<Module>;
const char* const kNotTokens = "numbers";

ModulePtr linear(const LayerArgs& a, Flow& f) {
  a.input(!f.tokens && (f.shape.size() == 1 || f.shape.size() == 2),
          f.shape.size() == 3 ? "[features] (add `flatten` before it)" : "[features] or [T, D]");
  const int64_t out = a.integer("out", f.classes);
  const int64_t in = f.shape.back();
  f.shape.back() = out;
  return std::make_shared<Linear>(in, out, LinearOptions{.bias = a.flag("bias", true)});
}

// (n + 2 * padding - kernel) / stride + 1, which must be at least 1.
int64_t window_out(const LayerArgs& a, int64_t n, int64_t k, int64_t s, int64_t p) {
  a.check(n + 2 * p >= k, "has a window of ", k, " larger than the input's ", n, " (+ padding)");
  return (n + 2 * p - k) / s + 1;
}

ModulePtr conv2d(const LayerArgs& a, Flow& f) {
  a.input(f.shape.size() == 3 && !f.tokens, "images [C, H, W] (flat data: set data.shape)");
  const int64_t out = a.integer("out", std::nullopt), k = a.integer("kernel", std::nullopt);
  const int64_t s = a.integer("stride", 1), p = a.integer("padding", 0, 0);
  const int64_t in = f.shape[0];
  f.shape = {out, window_out(a, f.shape[1], k, s, p), window_out(a, f.shape[2], k, s, p)};
  Conv2dOptions o{.stride = s, .padding = p, .bias = a.flag("bias", true)};
  return std::make_shared<Conv2d>(in, out, k, o);
}

ModulePtr maxpool(const LayerArgs& a, Flow& f) {
  a.input(f.shape.size() == 3 && !f.tokens, "images [C, H, W]");
  const int64_t k = a.integer("kernel", std::nullopt), s = a.integer("stride", k);
  f.shape = {f.shape[0], window_out(a, f.shape[1], k, s, 0), window_out(a, f.shape[2], k, s, 0)};
  return std::make_shared<MaxPool2d>(k, s);
}

ModulePtr avgpool(const LayerArgs& a, Flow& f) {
  a.input(f.shape.size() == 3 && !f.tokens, "images [C, H, W]");
  const int64_t k = a.integer("kernel", std::nullopt);
  f.shape = {f.shape[0], window_out(a, f.shape[1], k, k, 0), window_out(a, f.shape[2], k, k, 0)};
  return std::make_shared<AvgPool2d>(k);
}

ModulePtr globalavgpool(const LayerArgs& a, Flow& f) {
  a.input(f.shape.size() == 3 && !f.tokens, "images [C, H, W]");
  f.shape = {f.shape[0], 1, 1};
  return std::make_shared<GlobalAvgPool2d>();
}

ModulePtr batchnorm(const LayerArgs& a, Flow& f) {
  a.input((f.shape.size() == 1 || f.shape.size() == 3) && !f.tokens, "[features] or [C, H, W]");
  BatchNormOptions o{.eps = a.real("eps", 1e-5, 1e-12, 1.0),
                     .momentum = a.real("momentum", 0.1, 0.0, 1.0)};
  return std::make_shared<BatchNorm>(f.shape[0], o);
}

ModulePtr layernorm(const LayerArgs& a, Flow& f) {
  a.input(!f.tokens, kNotTokens);
  return std::make_shared<LayerNorm>(f.shape.back(),
                                     LayerNormOptions{.eps = a.real("eps", 1e-5, 1e-12, 1.0)});
}

ModulePtr dropout(const LayerArgs& a, Flow& f) {
  a.input(!f.tokens, kNotTokens);
  return std::make_shared<Dropout>(a.real("p", 0.5, 0.0, 1.0));
}

template <typename Layer>
ModulePtr activation(const LayerArgs& a, Flow& f) {
  a.input(!f.tokens, kNotTokens);
  return std::make_shared<Layer>();
}

ModulePtr flatten(const LayerArgs& a, Flow& f) {
  a.input(!f.tokens, kNotTokens);
  int64_t n = 1;
  for (int64_t d : f.shape) n *= d;
  f.shape = {n};
  return std::make_shared<Flatten>();
}

ModulePtr embedding(const LayerArgs& a, Flow& f) {
  a.input(f.tokens && f.shape.size() == 1, "token ids [T] (text data)");
  const int64_t dim = a.integer("dim", std::nullopt);
  f.shape = {f.shape[0], dim};
  f.tokens = false;
  return std::make_shared<Embedding>(f.vocab > 0 ? f.vocab : f.classes, dim);
}

ModulePtr positions(const LayerArgs& a, Flow& f) {
  a.input(f.shape.size() == 2 && !f.tokens, "a sequence [T, D] (after `embedding`)");
  return std::make_shared<PositionEmbedding>(f.shape[0], f.shape[1]);
}

ModulePtr attention(const LayerArgs& a, Flow& f) {
  a.input(f.shape.size() == 2 && !f.tokens, "a sequence [T, D] (after `embedding`)");
  GptOptions o;
  o.n_head = a.integer("heads", std::nullopt);
  o.n_embd = f.shape[1];
  o.dropout = a.real("dropout", 0.0, 0.0, 1.0);
  a.check(o.n_embd % o.n_head == 0, "needs the width ", o.n_embd, " divisible by heads ", o.n_head);
  return std::make_shared<CausalSelfAttention>(o);
}

struct LayerKind {
  const char* name;
  std::vector<std::string> values;  // positional first, then options
  ModulePtr (*build)(const LayerArgs&, Flow&);
};

const std::vector<LayerKind>& layer_kinds() {
  static const std::vector<LayerKind> kinds = {
      {"linear", {"out", "bias"}, linear},
      {"conv2d", {"out", "kernel", "stride", "padding", "bias"}, conv2d},
      {"maxpool", {"kernel", "stride"}, maxpool},
      {"avgpool", {"kernel"}, avgpool},
      {"globalavgpool", {}, globalavgpool},
      {"batchnorm", {"eps", "momentum"}, batchnorm},
      {"layernorm", {"eps"}, layernorm},
      {"dropout", {"p"}, dropout},
      {"relu", {}, activation<ReLU>},
      {"gelu", {}, activation<GELU>},
      {"tanh", {}, activation<Tanh>},
      {"sigmoid", {}, activation<Sigmoid>},
      {"flatten", {}, flatten},
      {"embedding", {"dim"}, embedding},
      {"positions", {}, positions},
      {"attention", {"heads", "dropout"}, attention},
      {"residual", {}, nullptr},  // built by build_into around its body
  };
  return kinds;
}

const LayerKind& kind_of(const LayerSpec& spec, const std::string& origin) {
  const LayerKind* best = nullptr;
  size_t best_distance = 0;
  std::string all;
  for (const LayerKind& k : layer_kinds()) {
    if (spec.type == k.name) return k;
    size_t d = edit_distance(spec.type, k.name);
    if (!best || d < best_distance) best = &k, best_distance = d;
    all += (all.empty() ? "" : ", ") + std::string(k.name);
  }
  throw InvalidArgument(detail::str(origin, ": ", describe(spec), ": unknown layer type `",
                                    spec.type, "` (did you mean `", best->name,
                                    "`?); the types: ", all, " (docs/models.md)"));
}

void build_into(Sequential& into, const std::vector<LayerSpec>& specs, Flow& flow,
                const std::string& origin) {
  for (const LayerSpec& spec : specs) {
    const LayerKind& kind = kind_of(spec, origin);
    LayerArgs args(spec, kind.values, flow, origin);
    if (kind.build) {
      into.push_back(kind.build(args, flow));
      continue;
    }
    const Flow before = flow;
    auto block = std::make_shared<Residual>();
    build_into(*block, spec.body, flow, origin);
    args.check(!block->named_children().empty(), "has no layers before its `end`");
    args.check(flow.shape == before.shape && flow.tokens == before.tokens, "turns ",
               shape_str(before.shape), " into ", shape_str(flow.shape),
               "; a residual block must keep the shape");
    into.push_back(block);
  }
}

}  // namespace

std::shared_ptr<Sequential> make_sequential(const SequentialOptions& o) {
  const SequentialInput& in = o.input;
  COHORT_CHECK_ARG(!in.sample_shape.empty() && in.classes >= 2, o.origin,
                   ": a sequential model needs the data's sample shape and at least 2 classes, "
                   "got ",
                   shape_str(in.sample_shape), " and ", in.classes);
  Flow flow{in.sample_shape, in.tokens, in.classes, in.vocab};
  auto model = std::make_shared<Sequential>();
  build_into(*model, parse_layer_list(o.layers, o.origin), flow, o.origin);
  const size_t want_dims = in.tokens ? 2 : 1;
  COHORT_CHECK_ARG(
      !flow.tokens && flow.shape.size() == want_dims && flow.shape.back() == in.classes, o.origin,
      ": the last layer gives ", shape_str(flow.shape), " per sample, but ",
      in.tokens ? "a language model needs [T, " : "the data needs [", in.classes, "]", " (its ",
      in.classes, " classes): end with `linear` (its width defaults to the ", "classes)",
      flow.shape.size() > want_dims ? ", after `flatten`" : "");
  model->reset_parameters(o.seed);
  reseed_dropouts(*model, o.seed);
  return model;
}

}  // namespace cohort::nn
