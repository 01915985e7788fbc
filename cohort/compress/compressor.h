#pragma once
// Gradient compressors: one codec turns a float vector into a message of fewer bytes and back.
// Written once here for every user that moves gradients: DDP comm hooks
// (parallel/ddp/compression_hook.h), compressed gossip (parallel/decentralized/choco_gossip.h) and
// the parameter-server push (ps/push_codec.h). No tensor, no network: spans of floats in, bytes
// out; the caller moves the bytes.
//
//   auto c = compress::make_compressor({.method = compress::Method::kTopK, .ratio = 0.01});
//   std::vector<uint8_t> msg(c->message_bytes(n));
//   compress::Residual r;                        // error feedback: one per stream (bucket, key)
//   c->encode(grad, msg, {.round = step, .scale = 1.0f / world}, &r);
//   ... exchange ...   c->decode_add(msg_of_rank_k, {.round = step}, out);  // for every k
//
// How messages combine over ranks (Combine):
//   kSum:    element-wise sum of the messages as wire_dtype() (fp16, bf16: an allreduce of the
//            cast values; random-k: an allreduce of the k values, the indices being the same on
//            every rank since they come from a shared seed and the round);
//   kGather: messages are concatenated (top-k: each rank's own indices), and decode_add runs
//            once per rank's message.
//
// Error feedback (Stich et al. 2018): with a Residual, encode compresses grad + residual and
// keeps in the residual what it did not send, so over steps nothing is lost:
//   sum of sent (unscaled) + residual == sum of grads.
// `scale` multiplies what goes into the message (1/world: the sum of messages is the average),
// never the residual.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/dtype.h"

namespace cohort::compress {

enum class Method : uint8_t { kNone, kFp16, kBf16, kTopK, kRandomK, kSign, kQsgd };

// "none", "fp16", "bf16", "topk", "randomk", "signsgd", "qsgd".
const char* method_name(Method m);
// The inverse; InvalidArgument naming `key` (the config key it came from) and the choices.
Method parse_method(const std::string& name, const std::string& key);
// The spellings parse_method accepts, in declaration order (for config choices).
std::vector<std::string> method_names();

enum class Combine : uint8_t { kSum, kGather };

struct CompressorOptions {
  Method method = Method::kNone;
  double ratio = 0.01;  // top-k, random-k: k = max(1, round(ratio * numel)), ratio in (0, 1]
  uint64_t seed = 0;    // random-k: the same on every rank; qsgd: its rounding draws
  int levels = 8;       // qsgd: s, in [1, 127]
};

struct CodecContext {
  uint64_t round = 0;  // how many messages this stream sent before (random-k's indices)
  float scale = 1.0f;  // encode: multiplies what is sent (not the residual)
};

// The memory of error feedback for one stream of same-sized vectors.
class Residual {
 public:
  // values += grad (sized to grad, zeros, on first use; InvalidArgument if the size changes).
  void accumulate(std::span<const float> grad);
  std::span<float> values() { return values_; }
  std::span<const float> values() const { return values_; }
  void assign(std::vector<float> v) { values_ = std::move(v); }

 private:
  std::vector<float> values_;
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  virtual Method method() const = 0;
  virtual Combine combine() const = 0;
  // The element type the kSum messages are summed as (f16, bf16, f32); u8 for kGather.
  virtual DType wire_dtype() const = 0;
  // Message size in bytes for `numel` floats: the same on every rank.
  virtual size_t message_bytes(size_t numel) const = 0;
  // grad -> message (message_bytes(grad.size()) bytes, InvalidArgument otherwise). With a
  // residual: compresses grad + residual and leaves in it what was not sent.
  void encode(std::span<const float> grad, std::span<uint8_t> message, const CodecContext& ctx,
              Residual* residual);
  // out += the decoded message (a message of out.size() floats).
  virtual void decode_add(std::span<const uint8_t> message, const CodecContext& ctx,
                          std::span<float> out) const = 0;

 protected:
  // Writes the message for `in`; when `unsent` is not empty (it may alias `in`), sets it to
  // in - what was sent (before scaling).
  virtual void encode_values(std::span<const float> in, std::span<uint8_t> message,
                             const CodecContext& ctx, std::span<float> unsent) = 0;
  void check_message(size_t bytes, size_t numel, const char* what) const;
};

// InvalidArgument for Method::kNone (nothing to compress) or a ratio outside (0, 1].
std::unique_ptr<Compressor> make_compressor(const CompressorOptions& options);

}  // namespace cohort::compress
