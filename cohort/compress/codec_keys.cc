#include "cohort/compress/codec_keys.h"

#include "cohort/core/error.h"

namespace cohort::compress {

void add_codec_keys(ConfigRegistry& r, const CodecKeys& k) {
  const std::string& p = k.prefix;
  r.add({p + ".compression", ConfigType::kString, std::string("none"), k.compression_doc, "",
         k.choices.empty() ? method_names() : k.choices});
  for (const ConfigKey& extra : k.after_compression) r.add(extra);
  r.add({p + ".topk_ratio", ConfigType::kFloat, k.topk_ratio, k.topk_ratio_doc, "", {}, 0.0, 1.0});
  r.add(
      {p + ".qsgd_levels", ConfigType::kInt, k.qsgd_levels, k.qsgd_levels_doc, "", {}, 1.0, 127.0});
  if (!k.error_feedback_doc.empty())
    r.add({p + ".error_feedback", ConfigType::kBool, true, k.error_feedback_doc});
}

uint64_t shared_seed(const Config& cfg) {
  if (cfg.registry().find("run.seed") != nullptr) return uint64_t(cfg.get_int("run.seed"));
  return 0x636f686f7274;  // "cohort"
}

CodecSettings read_codec_keys(const Config& cfg, const std::string& prefix) {
  CodecSettings s;
  s.prefix = prefix;
  s.compression = cfg.get_string(prefix + ".compression");
  s.topk_ratio = cfg.get_float(prefix + ".topk_ratio");
  s.qsgd_levels = int(cfg.get_int(prefix + ".qsgd_levels"));
  const std::string ef = prefix + ".error_feedback";
  if (cfg.registry().find(ef) != nullptr) s.error_feedback = cfg.get_bool(ef);
  return s;
}

Method CodecSettings::method() const {
  return parse_method(compression, prefix + ".compression");
}

double CodecSettings::checked_ratio() const {
  COHORT_CHECK_ARG(topk_ratio > 0 && topk_ratio <= 1, prefix, ".topk_ratio = ", topk_ratio,
                   " is outside (0, 1]");
  return topk_ratio;
}

int CodecSettings::checked_levels() const {
  COHORT_CHECK_ARG(qsgd_levels >= 1 && qsgd_levels <= 127, prefix, ".qsgd_levels = ", qsgd_levels,
                   " is outside [1, 127]");
  return qsgd_levels;
}

}  // namespace cohort::compress
