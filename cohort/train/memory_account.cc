#include "cohort/train/memory_account.h"

#include "cohort/core/logging.h"
#include "cohort/core/process_memory.h"
#include "cohort/tensor/device_memory.h"

namespace cohort::train {
namespace {

nlohmann::json by_kind(const std::array<uint64_t, kMemoryKinds>& bytes) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t k = 0; k < kMemoryKinds; ++k) j[memory_kind_name(MemoryKind(k))] = bytes[k];
  return j;
}

}  // namespace

MemoryAccount::MemoryAccount(const Config& cfg) {
  int64_t mb = cfg.get_int("run.memory_limit_mb");
  if (mb <= 0) return;
  CpuAllocator::instance().set_limit(uint64_t(mb) << 20,
                                     detail::str("run.memory_limit_mb = ", mb, " (per process)"));
  limited_ = true;
}

MemoryAccount::~MemoryAccount() {
  if (limited_) CpuAllocator::instance().set_limit(0);
}

void MemoryAccount::tag_parameters(const nn::Module& model) {
  params_ = model.parameters();
  for (const Tensor& p : params_) tag_memory(p, MemoryKind::kParameters);
  if (!params_.empty()) device_ = params_[0].device();
}

void MemoryAccount::start() {
  CpuAllocator::instance().reset_peak();
}

void MemoryAccount::after_backward() {
  for (const Tensor& p : params_) {
    Tensor g = p.grad();
    if (g.defined()) tag_memory(g, MemoryKind::kGradients);
  }
}

void MemoryAccount::end_step() {
  at_step_end_ = CpuAllocator::instance().usage();
  stepped_ = true;
}

nlohmann::json MemoryAccount::summary_json() const {
  MemoryUsage now = CpuAllocator::instance().usage();
  const MemoryUsage& at = stepped_ ? at_step_end_ : now;  // no step ran: what is held now
  // Peaks over the training steps: what comes after (the final evaluation and checkpoint, for
  // which ZeRO-3 gathers the whole model) is reported apart.
  nlohmann::json j{{"memory_bytes", by_kind(at.bytes)},
                   {"memory_peak_by_kind", by_kind(at.peak_bytes)},
                   {"memory_peak_bytes", at.peak_total},
                   {"memory_peak_run_bytes", now.peak_total},
                   {"memory_limit_bytes", now.limit},
                   {"process_peak_rss_bytes", process_memory().peak_rss_bytes}};
  if (device_.is_cpu()) return j;
  const DeviceMemoryStats d = device_memory(device_).stats(device_.index);
  j["device"] = device_.str();
  j["device_memory_peak_bytes"] = d.peak_bytes_in_use;
  j["device_memory_cached_bytes"] = d.bytes_cached;
  return j;
}

std::string MemoryAccount::summary_line(int rank) const {
  nlohmann::json j = summary_json();
  std::string line = detail::str("memory (rank ", rank, "):");
  const char* sep = " ";
  for (MemoryKind k : {MemoryKind::kParameters, MemoryKind::kGradients, MemoryKind::kOptimizer,
                       MemoryKind::kCommunication, MemoryKind::kOther}) {
    const char* name = memory_kind_name(k);
    line += detail::str(sep, name, " ", format_bytes(j["memory_bytes"][name].get<uint64_t>()));
    sep = ", ";
  }
  line += ", peak " + format_bytes(j["memory_peak_bytes"].get<uint64_t>());
  if (uint64_t limit = j["memory_limit_bytes"].get<uint64_t>(); limit > 0)
    line += " of the " + format_bytes(limit) + " limit";
  if (j.contains("device"))
    line += detail::str(" (host); ", j["device"].get<std::string>(), ": peak ",
                        format_bytes(j["device_memory_peak_bytes"].get<uint64_t>()), " in use, ",
                        format_bytes(j["device_memory_cached_bytes"].get<uint64_t>()), " cached");
  if (uint64_t rss = j["process_peak_rss_bytes"].get<uint64_t>(); rss > 0)
    line += "; process peak RSS " + format_bytes(rss);
  return line;
}

void warn_rss_over_limit(const nlohmann::json& summary) {
  const std::string w = rss_over_limit_warning(summary["memory_limit_bytes"].get<uint64_t>(),
                                               summary["memory_peak_run_bytes"].get<uint64_t>(),
                                               summary["process_peak_rss_bytes"].get<uint64_t>());
  if (!w.empty()) log::warn("memory", w);
}

std::string rss_over_limit_warning(uint64_t limit_bytes, uint64_t tensor_peak_bytes,
                                   uint64_t rss_peak_bytes) {
  if (limit_bytes == 0 || rss_peak_bytes <= limit_bytes) return "";
  return detail::str("process peak RSS ", format_bytes(rss_peak_bytes),
                     " is above run.memory_limit_mb = ", limit_bytes >> 20, " (",
                     format_bytes(limit_bytes), "); that key caps tensor memory (peak ",
                     format_bytes(tensor_peak_bytes),
                     "), not the process's resident memory: code and libraries, thread stacks, "
                     "the heap, mapped files (docs/memory.md)");
}

}  // namespace cohort::train
