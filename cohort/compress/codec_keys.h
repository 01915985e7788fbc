#pragma once
// The config keys of a gradient codec, declared once for every stream that compresses: DDP's
// buckets (ddp.*), compressed gossip (gossip.*) and the parameter-server push (ps.*). Each
// stream keeps its own prefix, defaults and docs (a push range wants another top-k share than
// a bucket), but the key names, types, ranges and how they are read and checked live here.
//
//   <prefix>.compression     string, none or a compress::Method name (plus extra choices)
//   <prefix>.topk_ratio      float in [0, 1] (read: (0, 1]), topk and randomk's share
//   <prefix>.qsgd_levels     int in [1, 127], QSGD's levels s
//   <prefix>.error_feedback  bool, optional: keep what was not sent for the next step
#include <cstdint>
#include <string>
#include <vector>

#include "cohort/compress/compressor.h"
#include "cohort/core/config.h"

namespace cohort::compress {

struct CodecKeys {
  std::string prefix;                // "ddp": keys ddp.compression, ddp.topk_ratio, ...
  std::vector<std::string> choices;  // <prefix>.compression's values; empty: method_names()
  double topk_ratio = 0.1;
  int64_t qsgd_levels = 8;
  std::string compression_doc, topk_ratio_doc, qsgd_levels_doc;
  std::string error_feedback_doc;  // empty: the stream declares no <prefix>.error_feedback
  // The stream's own codec knobs (PowerSGD's rank, CHOCO's step), declared right after
  // <prefix>.compression so that docs/config.md lists them next to it.
  std::vector<ConfigKey> after_compression;
};

// Declares the keys above (Internal if any is declared already).
void add_codec_keys(ConfigRegistry& r, const CodecKeys& keys);

// A seed every rank shares: run.seed when the registry declares it, else a fixed constant.
// Codecs that draw (randomk, QSGD, PowerSGD) derive theirs from it by label.
uint64_t shared_seed(const Config& cfg);

// The values of one prefix's codec keys, as set. The checks are separate because each stream
// checks at its own point (DDP only once a codec is chosen, the PS push always).
struct CodecSettings {
  std::string prefix;
  std::string compression;  // as given: DDP's "powersgd" is a hook, not a compress::Method
  double topk_ratio = 0;
  int qsgd_levels = 0;
  bool error_feedback = true;  // true where the prefix declares no error_feedback key

  Method method() const;  // parse_method, naming <prefix>.compression
  // InvalidArgument "<prefix>.topk_ratio = r is outside (0, 1]" (the registry allows 0).
  double checked_ratio() const;
  // InvalidArgument "<prefix>.qsgd_levels = s is outside [1, 127]".
  int checked_levels() const;
};
CodecSettings read_codec_keys(const Config& cfg, const std::string& prefix);

}  // namespace cohort::compress
