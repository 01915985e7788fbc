#include "cohort/ps/push_codec.h"

#include <algorithm>

#include "cohort/compress/codec_keys.h"
#include "cohort/core/error.h"
#include "cohort/core/rng.h"

namespace cohort::ps {

using detail::str;

void add_push_compression_keys(ConfigRegistry& r) {
  // Own keys rather than ddp.*: a PS job's push is another stream than DDP's buckets (a key
  // range per server), and the defaults differ (10% suits a range better than 1% of a bucket).
  compress::add_codec_keys(
      r, {.prefix = "ps",
          .topk_ratio = 0.1,
          .qsgd_levels = 8,
          .compression_doc =
              "Compress each push (docs/ps.md, \"Compressed pushes\"): none, fp16, bf16, topk, "
              "randomk (k = ps.topk_ratio of each server's range), signsgd, qsgd (ps.qsgd_levels). "
              "The servers decode every worker's message separately.",
          .topk_ratio_doc = "ps.compression = topk, randomk: the share of each server's key range "
                            "pushed per step, in (0, 1].",
          .qsgd_levels_doc =
              "ps.compression = qsgd: the quantization levels s (each value travels as a byte).",
          .error_feedback_doc = "ps.compression = topk, randomk, signsgd: each worker keeps, per "
                                "server, what it did not push and adds it to the next push (not "
                                "checkpointed: a restarted worker starts from zero residuals)."});
}

PushCompression push_compression_from_config(const Config& cfg) {
  const compress::CodecSettings codec = compress::read_codec_keys(cfg, "ps");
  PushCompression c;
  c.method = codec.method();
  c.ratio = codec.checked_ratio();
  c.levels = codec.checked_levels();
  c.error_feedback = codec.error_feedback;
  c.seed = derive_seed(compress::shared_seed(cfg), "ps.push_codec");
  return c;
}

// Only what the method reads: workers and servers that differ in a knob their codec ignores
// (an fp16 job's ps.qsgd_levels) still agree.
CodecSpec codec_spec(const PushCompression& c) {
  using compress::Method;
  if (!c.enabled()) return {};
  CodecSpec s{uint8_t(c.method), 0.0, 0, 0};
  if (c.method == Method::kTopK || c.method == Method::kRandomK) s.ratio = c.ratio;
  if (c.method == Method::kQsgd) s.levels = c.levels;
  if (c.method == Method::kRandomK || c.method == Method::kQsgd) s.seed = c.seed;
  return s;
}

namespace {

std::string describe(const CodecSpec& s) {
  if (s.method >= compress::method_names().size()) return str("codec ", int(s.method));
  const auto m = compress::Method(s.method);
  std::string d = str("ps.compression = '", compress::method_name(m), "'");
  if (m == compress::Method::kTopK || m == compress::Method::kRandomK)
    d += str(", ps.topk_ratio = ", s.ratio);
  if (m == compress::Method::kQsgd) d += str(", ps.qsgd_levels = ", s.levels);
  return d;
}

}  // namespace

std::string codec_difference(const CodecSpec& worker, const CodecSpec& server) {
  if (worker == server) return "";
  std::string w = describe(worker), s = describe(server);
  if (w == s) {  // the same keys: the seed (random-k's indices, QSGD's draws) differs
    w += " with another run.seed";
    s += " with its run.seed";
  }
  return str("pushes with ", w, ", this server expects ", s);
}

std::unique_ptr<compress::Compressor> make_push_codec(const PushCompression& c, int rank,
                                                      int server) {
  const uint64_t seed = derive_seed(derive_seed(c.seed, uint64_t(rank)), uint64_t(server));
  return compress::make_compressor(
      {.method = c.method, .ratio = c.ratio, .seed = seed, .levels = c.levels});
}

namespace {

bool keeps_residual(const PushCompression& c) {
  using compress::Method;
  return c.error_feedback &&
         (c.method == Method::kTopK || c.method == Method::kRandomK || c.method == Method::kSign);
}

}  // namespace

PushEncoder::PushEncoder(const PushCompression& c, int rank, int server)
    : rank_(rank), codec_(make_push_codec(c, rank, server)), error_feedback_(keeps_residual(c)) {}

Bytes PushEncoder::encode(int64_t step, KeyRange range, std::span<const float> grads) {
  Bytes frame = encode_push_frame(rank_, step, range, uint8_t(codec_->method()),
                                  codec_->message_bytes(grads.size()));
  codec_->encode(grads, push_message(frame), {.round = uint64_t(step), .scale = 1.0f},
                 error_feedback_ ? &residual_ : nullptr);
  return frame;
}

PushDecoder::PushDecoder(const PushCompression& c, int server, int num_workers)
    : method_(c.method) {
  if (!c.enabled()) return;
  for (int r = 0; r < num_workers; ++r) codecs_.push_back(make_push_codec(c, r, server));
}

void PushDecoder::check(const Push& p, int rank, KeyRange range, const std::string& who) const {
  const auto name = [](uint8_t m) {
    return m < compress::method_names().size() ? compress::method_name(compress::Method(m))
                                               : "unknown";
  };
  COHORT_CHECK_ARG(p.codec == uint8_t(method_), who, ": worker ", rank, " pushed keys [",
                   p.range.begin, ", ", p.range.end, ") compressed as '", name(p.codec), "' (",
                   int(p.codec), "), this server expects '", name(uint8_t(method_)),
                   "' (ps.compression must be the same for every worker and server)");
  if (p.codec == 0) return;  // the f32 size check is the caller's, as before compression
  const size_t want = codecs_.at(size_t(rank))->message_bytes(size_t(range.size()));
  COHORT_CHECK_ARG(p.range == range && p.bytes == want, who, ": worker ", rank, " pushed a ",
                   p.bytes, "-byte ", name(p.codec), " message for keys [", p.range.begin, ", ",
                   p.range.end, "); this server owns keys [", range.begin, ", ", range.end,
                   ") and expects ", want, " bytes for their ", range.size(), " values");
}

void PushDecoder::decode_add(const Push& p, int rank, std::span<float> out) const {
  codecs_.at(size_t(rank))
      ->decode_add({p.grads, p.bytes}, {.round = uint64_t(p.step), .scale = 1.0f}, out);
}

}  // namespace cohort::ps
