#include "cohort/parallel/ddp/compression_meter.h"

#include <algorithm>

namespace cohort::parallel {

void CompressionMeter::Totals::add(const Totals& o) {
  steps += o.steps;
  encode_s += o.encode_s;
  decode_s += o.decode_s;
}

nlohmann::json CompressionMeter::Totals::json(const ByteCounts& bytes) const {
  const uint64_t raw_bytes = bytes.bytes_in, message_bytes = bytes.bytes_out;
  double n = double(std::max<uint64_t>(steps, 1));
  return {{"compress_raw_bytes", double(raw_bytes) / n},
          {"compress_message_bytes", double(message_bytes) / n},
          {"compress_ratio", message_bytes ? double(raw_bytes) / double(message_bytes) : 0.0},
          {"compress_encode_ms", 1e3 * encode_s / n},
          {"compress_decode_ms", 1e3 * decode_s / n}};
}

nlohmann::json CompressionMeter::take_interval() {
  interval_.encode_s = double(encode_ns_.exchange(0)) * 1e-9;
  interval_.decode_s = double(decode_ns_.exchange(0)) * 1e-9;
  run_.add(interval_);
  nlohmann::json j = interval_.json(bytes_.take_interval());
  interval_ = {};
  return j;
}

nlohmann::json CompressionMeter::summary(const std::string& method) const {
  Totals t = run_;
  t.add(interval_);
  t.encode_s += double(encode_ns_.load()) * 1e-9;
  t.decode_s += double(decode_ns_.load()) * 1e-9;
  nlohmann::json j = t.json(bytes_.total());
  j["compression"] = method;
  return j;
}

}  // namespace cohort::parallel
