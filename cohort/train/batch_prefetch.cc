#include "cohort/train/batch_prefetch.h"

#include <exception>
#include <utility>

#include "cohort/tensor/device_memory.h"

namespace cohort::train {

// A step whose batches are being copied to the device. Members go in reverse order: the uploads'
// handles first (each makes the device wait for its copy), then the tensors copied into, so no
// block returns to the device's cache while a copy into it may still run (device_memory.h).
struct BatchPrefetch::Held {
  StepInput input;  // its batches, on the device
  std::vector<std::unique_ptr<PendingUpload>> uploads;
  std::exception_ptr error;  // the upload failed: thrown when this step's turn comes
};

namespace {

using Uploads = std::vector<std::unique_ptr<PendingUpload>>;

// What an upload needs of a micro-batch; the synchronous path would fail later, at some op.
void check_batch(const data::Batch& b, size_t i, Device device) {
  COHORT_CHECK_ARG(b.x.defined() && b.y.defined(), "batch upload: micro-batch ", i,
                   " lacks x or y");
  for (const auto& [t, name] : {std::pair{&b.x, "x"}, std::pair{&b.y, "y"}})
    COHORT_CHECK_ARG(t->device().is_cpu() || t->device() == device, "batch upload: micro-batch ", i,
                     "'s ", name, " is on ", t->device().str(), ", training runs on ", device.str(),
                     ": batches come from the host");
  COHORT_CHECK_ARG(b.x.dim() >= 1 && b.y.dim() >= 1 && b.x.size(0) == b.y.size(0),
                   "batch upload: micro-batch ", i, " has x ", shape_str(b.x.shape()), " and y ",
                   shape_str(b.y.shape()), ": both must hold the same number of samples");
}

// `host` on `device`, its copy started; the copy's handle joins `uploads` before this returns, so
// whoever holds `uploads` and the result releases them in the safe order.
Tensor start_upload(const Tensor& host, Device device, Uploads& uploads) {
  if (host.device() == device) return host;
  const Tensor src = host.contiguous_raw();
  Tensor dst = empty(src.shape(), src.dtype(), device);
  uploads.emplace_back();  // room first: nothing may throw once the copy has started
  uploads.back() = device_memory(device).upload_async(device.index, dst.raw_data(), src.raw_data(),
                                                      src.nbytes());
  return dst;
}

}  // namespace

BatchPrefetch::BatchPrefetch(Device device, bool enabled)
    : device_(device), ahead_(enabled && !device.is_cpu()) {}

BatchPrefetch::~BatchPrefetch() = default;

std::optional<StepInput> BatchPrefetch::push(StepInput next) {
  if (!ahead_) return next;
  // The next step's copies start before the held step's kernels are queued: they overlap them.
  std::unique_ptr<Held> fresh = upload(std::move(next));
  std::optional<StepInput> ready = flush();
  held_ = std::move(fresh);
  return ready;
}

std::optional<StepInput> BatchPrefetch::flush() {
  if (!held_) return std::nullopt;
  const std::unique_ptr<Held> h = std::move(held_);
  if (h->error) std::rethrow_exception(h->error);
  for (const auto& u : h->uploads)
    if (u) u->device_wait();  // the device, not the host, waits: the step's kernels come after
  return std::move(h->input);
}

std::unique_ptr<BatchPrefetch::Held> BatchPrefetch::upload(StepInput in) const {
  auto held = std::make_unique<Held>();
  held->input.epoch = in.epoch;
  held->input.batch_index = in.batch_index;
  held->input.data_s = in.data_s;
  try {
    held->input.micro.resize(in.micro.size());
    for (size_t i = 0; i < in.micro.size(); ++i) {
      check_batch(in.micro[i], i, device_);
      held->input.micro[i].x = start_upload(in.micro[i].x, device_, held->uploads);
      held->input.micro[i].y = start_upload(in.micro[i].y, device_, held->uploads);
    }
  } catch (...) {
    held->error = std::current_exception();
    held->uploads.clear();      // the device waits for the copies that started, then
    held->input.micro.clear();  // their destinations go back
  }
  return held;
}

}  // namespace cohort::train
