#include "cohort/train/device_select.h"

#include <string>

#include "cohort/dispatch/kernel_table.h"
#include "cohort/parallel/builtin_strategies.h"
#include "cohort/tensor/device_memory.h"
#if defined(COHORT_HAVE_CUDA)
#include "cohort/device/cuda_memory.h"
#endif

namespace cohort::train {
namespace {

// True when a CUDA backend is registered already (memory and kernels), e.g. by a test.
bool cuda_registered() {
  try {
    dispatch::kernels_for(Device::cuda(0));
    device_memory(Device::cuda(0));
    return true;
  } catch (const InvalidArgument&) {
    return false;
  }
}

void enable_cuda_backend() {
  if (cuda_registered()) return;
#if defined(COHORT_HAVE_CUDA)
  std::string why;
  COHORT_CHECK_ARG(device::enable_cuda(&why), "run.device = \"cuda\": no usable GPU: ", why);
#else
  throw InvalidArgument(
      "run.device = \"cuda\": this build of cohort has no CUDA (configure with -DCOHORT_CUDA=on "
      "where the CUDA toolkit is installed; docs/gpu.md)");
#endif
}

}  // namespace

Device select_device(const Config& cfg, int world_size) {
  if (cfg.get_string("run.device") == "cpu") return Device::cpu();
  COHORT_CHECK_ARG(world_size == 1, "run.device = \"cuda\" with ", world_size,
                   " workers: training on GPUs across workers (NCCL) is not built yet; train "
                   "on one worker, or on the CPU");
  enable_cuda_backend();
  return Device::cuda(0);
}

void check_strategy_on_device(const Config& cfg, Device device, const std::string& running) {
  COHORT_CHECK_ARG(device.is_cpu() || running == parallel::kSingleProcessStrategy,
                   "run.device = \"cuda\" with parallel.strategy = '",
                   cfg.get_string("parallel.strategy"), "' (running as '", running,
                   "'): on a GPU only one-process training runs yet (strategies communicate from "
                   "host memory until GPU communication is built)");
}

}  // namespace cohort::train
