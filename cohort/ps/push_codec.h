#pragma once
// Compressed pushes (ps.compression; docs/ps.md, "Compressed pushes"): a worker encodes its
// gradient of each server's key range with a codec of compress/ (the same code as the DDP hook)
// and the server decodes every worker's message separately into its aggregation buffer.
//
// The frame: encode_push's 32-byte header with the codec (compress::Method) in its first pad
// byte, then the message (message_bytes(range size) bytes) where the f32 values would be. The
// server refuses a push whose codec or message size is not what it expects (PushDecoder), and
// before that a worker whose hello carries another codec spec (codec_difference): QSGD's levels
// and random-k's seed do not show in a message's size.
//
// Streams: one per (worker, server). Each encodes at scale 1 (the server averages, as for
// uncompressed pushes) with round = the push's step, which the header carries, and a seed of its
// own derived from the job's seed, the rank and the server: random-k's indices and QSGD's draws
// follow from (seed, step), so the server rebuilds them from the header without any index on the
// wire. Error feedback (topk, randomk, signsgd) keeps a residual per stream on the worker; a
// replayed push is the kept frame (worker.h), so its residual is never applied twice.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/compress/compressor.h"
#include "cohort/core/config.h"
#include "cohort/ps/protocol.h"

namespace cohort::ps {

struct PushCompression {
  compress::Method method = compress::Method::kNone;
  double ratio = 0.1;          // topk, randomk: the share of each range sent
  int levels = 8;              // qsgd
  bool error_feedback = true;  // topk, randomk, signsgd
  uint64_t seed = 0;           // the job's; every stream derives its own (above)
  bool enabled() const { return method != compress::Method::kNone; }
};

// Declares ps.compression, ps.topk_ratio, ps.qsgd_levels, ps.error_feedback.
void add_push_compression_keys(ConfigRegistry& r);
// Those keys, checked (InvalidArgument naming the key).
PushCompression push_compression_from_config(const Config& cfg);

// What a worker says at hello about its pushes (zeros for none), and the refusal of a worker
// whose spec is not the server's: empty when they agree, else what differs, naming the keys.
CodecSpec codec_spec(const PushCompression& c);
std::string codec_difference(const CodecSpec& worker, const CodecSpec& server);

// The codec of worker `rank`'s pushes to server `server` (its own seed, above).
std::unique_ptr<compress::Compressor> make_push_codec(const PushCompression& c, int rank,
                                                      int server);

// The worker's side of one stream: codec and residual.
class PushEncoder {
 public:
  PushEncoder(const PushCompression& c, int rank, int server);
  // The push frame of `step` for `grads` (the range's values), encoded straight into the frame.
  Bytes encode(int64_t step, KeyRange range, std::span<const float> grads);
  size_t message_bytes(size_t numel) const { return codec_->message_bytes(numel); }
  // Empty without error feedback or before the first push.
  std::span<const float> residual() const { return residual_.values(); }

 private:
  int rank_;
  std::unique_ptr<compress::Compressor> codec_;
  bool error_feedback_;
  compress::Residual residual_;
};

// The server's side: every worker's codec for this server's range.
class PushDecoder {
 public:
  PushDecoder(const PushCompression& c, int server, int num_workers);
  // InvalidArgument naming `who`, the worker and the keys when the push's codec is not this
  // server's, or its message is not the size of `range`'s.
  void check(const Push& p, int rank, KeyRange range, const std::string& who) const;
  // out += worker `rank`'s decoded push (out: the range's values).
  void decode_add(const Push& p, int rank, std::span<float> out) const;

 private:
  compress::Method method_;
  std::vector<std::unique_ptr<compress::Compressor>> codecs_;  // by rank
};

}  // namespace cohort::ps
