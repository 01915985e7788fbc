#pragma once
// A model from a list of layers (`model.type = "sequential"`, `model.layers`; docs/models.md):
// the layers run in order, each sized from the shape the previous one gives, starting from the
// data's sample shape, so no layer repeats a size the data already says.
//
//   type           values, then options (=default)          one sample's shape in -> out
//   linear         out (=classes)  bias=true                 [F] -> [out]; [T, D] -> [T, out]
//   conv2d         out kernel  stride=1 padding=0 bias=true  [C, H, W] -> [out, H', W']
//   maxpool        kernel  stride=kernel                     [C, H, W] -> [C, H', W']
//   avgpool        kernel (stride = kernel)                  [C, H, W] -> [C, H/k, W/k]
//   globalavgpool                                            [C, H, W] -> [C, 1, 1]
//   batchnorm      eps=1e-5 momentum=0.1                     [F] or [C, H, W], same
//   layernorm      eps=1e-5 (over the last dim)              same
//   dropout        p (=0.5)                                  same
//   relu gelu tanh sigmoid                                   same
//   flatten                                                  any -> [product]
//   embedding      dim                                       token ids [T] -> [T, dim]
//   positions      (learned, added)                          [T, D] -> [T, D]
//   attention      heads  dropout=0 (causal self-attention)  [T, D] -> [T, D]
//   residual ... end   x + the layers between (same shape)   same
//
// The layers are named as in torch.nn.Sequential ("0.weight", "3.running_mean"; a residual
// block's "4.1.weight"), so weights of a torch.nn.Sequential of the same list load with
// model.init_from. An attention layer holds "qkv" and "proj" Linears (GPT's).
#include <cstdint>
#include <memory>
#include <string>

#include "cohort/nn/layers.h"

namespace cohort::nn {

struct SequentialInput {
  Shape sample_shape;   // one sample's x: {F}, {C, H, W}, or {T} token ids
  bool tokens = false;  // x is int64 token ids (text): the list starts with `embedding`
  int64_t classes = 0;  // the last layer's width; a `linear` without `out` gets it
  int64_t vocab = 0;    // token ids are below it (`embedding`'s rows); 0: classes
};

struct SequentialOptions {
  std::string layers;  // the list (nn/layer_spec.h)
  SequentialInput input;
  uint64_t seed = 0;
  std::string origin = "model.layers";  // names the list in errors
};

// The model, initialised from `seed`. A layer that does not fit the shape before it, an unknown
// layer or option, a bad value, or a last layer that does not give `classes` outputs per sample
// (per token for text) is an InvalidArgument naming the layer's number and text, the shape it
// got and what it needs.
std::shared_ptr<Sequential> make_sequential(const SequentialOptions& options);

}  // namespace cohort::nn
