#include "cohort/tensor/device_memory.h"

#include <array>
#include <mutex>

#include "cohort/core/error.h"

namespace cohort {
namespace {

struct Registry {
  std::mutex mu;
  std::array<DeviceMemory*, 2> memory{};
  std::array<std::string, 2> why{};
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void set_device_memory(Device::Kind kind, DeviceMemory* memory,
                       const std::string& unavailable_why) {
  COHORT_CHECK_ARG(kind != Device::Kind::kCPU, "set_device_memory: the CPU's memory is built in");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.memory[size_t(kind)] = memory;
  r.why[size_t(kind)] = unavailable_why;
}

DeviceMemory& device_memory(Device device) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  DeviceMemory* m = r.memory[size_t(device.kind)];
  if (m) return *m;
  const std::string& why = r.why[size_t(device.kind)];
  throw InvalidArgument(
      detail::str("device ", device.str(), " is not available: ",
                  why.empty() ? "no backend for it was enabled (a build with COHORT_CUDA, and "
                                "cohort::device::enable_cuda() or run.device = \"cuda\")"
                              : why));
}

}  // namespace cohort
