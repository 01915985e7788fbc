#include "cohort/train/memory_account.h"

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
                   {"memory_limit_bytes", now.limit}};
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
  return line;
}

}  // namespace cohort::train
