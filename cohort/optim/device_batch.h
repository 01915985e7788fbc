#pragma once
// Parameters on a device collected into lists that the device updates in one launch each
// (dispatch/kernel_table.h's adamw_update, sgd_update): a list holds consecutive parameters with
// the same device and the same key (what their update's scalars depend on: AdamW's step count,
// SGD's phase), so its members all take the same update. Parameters stay in the optimizer's
// order, so the results are those of one update per parameter.
#include <functional>
#include <vector>

#include "cohort/tensor/dtype.h"

namespace cohort::optim {

template <typename Param, typename Key>
class DeviceBatch {
 public:
  // Called with each complete list, its device and its key.
  using Launch = std::function<void(Device, const Key&, const std::vector<Param>&)>;
  explicit DeviceBatch(Launch launch) : launch_(std::move(launch)) {}
  ~DeviceBatch() = default;  // flush() explicitly: a launch may throw

  void add(Device d, const Key& key, const Param& p) {
    if (!list_.empty() && (d != device_ || !(key == key_))) flush();
    device_ = d, key_ = key;
    list_.push_back(p);
  }
  void flush() {
    if (list_.empty()) return;
    launch_(device_, key_, list_);
    list_.clear();
  }

 private:
  Launch launch_;
  std::vector<Param> list_;
  Device device_;
  Key key_{};
};

}  // namespace cohort::optim
