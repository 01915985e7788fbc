#include "cohort/dispatch/kernel_table.h"

#include <array>
#include <atomic>

namespace cohort::dispatch {
namespace {

// Written once by a backend before its tensors exist, read on every op: atomics, no lock.
std::array<std::atomic<const KernelTable*>, 2>& tables() {
  static std::array<std::atomic<const KernelTable*>, 2> t{};
  return t;
}

}  // namespace

void set_kernel_table(Device::Kind kind, const KernelTable* table) {
  COHORT_CHECK_ARG(kind != Device::Kind::kCPU, "set_kernel_table: the CPU's table is built in");
  tables()[size_t(kind)].store(table, std::memory_order_release);
}

const KernelTable& kernels_for(Device device) {
  if (device.is_cpu()) return cpu_table();
  const KernelTable* t = tables()[size_t(device.kind)].load(std::memory_order_acquire);
  COHORT_CHECK_ARG(t != nullptr, "no kernels for ", device.str(),
                   ": its backend was not enabled (a build with COHORT_CUDA, and "
                   "cohort::device::enable_cuda() or run.device = \"cuda\")");
  return *t;
}

Device common_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t || !t->defined()) continue;
    if (!first) {
      first = t;
      continue;
    }
    COHORT_CHECK_ARG(t->device() == first->device(), op, ": tensors on ", first->device().str(),
                     " and ", t->device().str(), " (move them to one device with .to())");
  }
  return first ? first->device() : Device::cpu();
}

}  // namespace cohort::dispatch
