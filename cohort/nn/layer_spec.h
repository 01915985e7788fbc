#pragma once
// The text of a layer list (`model.layers`, docs/models.md): one layer per line or per `;`,
// a type followed by positional values and key=value options, `#` to the end of a line a
// comment, and `residual` ... `end` a residual block around the layers between them:
//
//   conv2d 32 kernel=3 padding=1; batchnorm; relu; maxpool 2
//   flatten; linear 128; relu; dropout 0.2; linear
//
// Parsing checks only the syntax; nn/models/sequential.h knows the types and their options.
#include <map>
#include <string>
#include <vector>

namespace cohort::nn {

struct LayerSpec {
  int index = 0;     // 1-based position in the list, counting every layer and `residual`
  std::string text;  // as written, for error messages
  std::string type;  // lower case: "conv2d"
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;
  std::vector<LayerSpec> body;  // a residual block's layers
};

// `origin` names the list in errors ("model.layers"). An empty list, an `end` without its
// `residual` (or the other way round), a repeated option or an empty `key=` is an
// InvalidArgument naming the layer's number and text.
std::vector<LayerSpec> parse_layer_list(const std::string& text, const std::string& origin);

// "layer 3 (`conv2d 32 kernel=0`)" for error messages.
std::string describe(const LayerSpec& spec);

}  // namespace cohort::nn
