#include "cohort/train/step_metrics.h"

#include <algorithm>

namespace cohort::train {

StepTimes& StepTimes::operator+=(const StepTimes& o) {
  data_s += o.data_s;
  forward_s += o.forward_s;
  backward_s += o.backward_s;
  optimizer_s += o.optimizer_s;
  exposed_s += o.exposed_s;
  comm_s += o.comm_s;
  bytes_sent += o.bytes_sent;
  bytes_received += o.bytes_received;
  samples += o.samples;
  job_samples += o.job_samples;
  return *this;
}

void StepMetrics::add(const StepTimes& t) {
  interval_ += t;
  run_ += t;
  ++interval_steps_;
  ++run_steps_;
}

nlohmann::json per_step_json(const StepTimes& t, int64_t steps) {
  double n = double(std::max<int64_t>(steps, 1));
  return nlohmann::json{{"data_ms", 1e3 * t.data_s / n},
                        {"forward_ms", 1e3 * t.forward_s / n},
                        {"backward_ms", 1e3 * t.backward_s / n},
                        {"optimizer_ms", 1e3 * t.optimizer_s / n},
                        {"exposed_comm_ms", 1e3 * t.exposed_s / n},
                        {"comm_ms", 1e3 * t.comm_s / n},
                        {"bytes_sent", t.bytes_sent},
                        {"bytes_received", t.bytes_received}};
}

nlohmann::json StepMetrics::take_interval() {
  nlohmann::json j = per_step_json(interval_, interval_steps_);
  j["steps"] = interval_steps_;
  interval_ = {};
  interval_steps_ = 0;
  return j;
}

double StepMetrics::hidden_share() const {
  if (run_.comm_s <= 0) return -1;
  return std::clamp(1.0 - run_.exposed_s / run_.comm_s, 0.0, 1.0);
}

}  // namespace cohort::train
