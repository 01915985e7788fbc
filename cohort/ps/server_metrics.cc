#include "cohort/ps/server_metrics.h"

#include <algorithm>

namespace cohort::ps {

void ServerMetrics::received(size_t bytes) {
  total_.bytes_in += bytes;
  interval_.bytes_in += bytes;
}

void ServerMetrics::sent(size_t bytes) {
  total_.bytes_out += bytes;
  interval_.bytes_out += bytes;
}

std::optional<ServerInterval> ServerMetrics::pushed(int64_t queue_depth, int64_t updates,
                                                    Clock::time_point now) {
  for (ServerTraffic* t : {&total_, &interval_}) {
    t->queue_depth_max = std::max(t->queue_depth_max, queue_depth);
    t->queue_depth_sum += double(queue_depth);
    ++t->samples;
  }
  if (!interval_start_) interval_start_ = now;
  if (every_ <= 0 || updates - interval_start_updates_ < every_) return std::nullopt;
  ServerInterval i{.updates = updates,
                   .interval_updates = updates - interval_start_updates_,
                   .seconds = std::chrono::duration<double>(now - *interval_start_).count(),
                   .traffic = interval_};
  interval_ = {};
  interval_start_updates_ = updates;
  interval_start_ = now;
  return i;
}

nlohmann::json traffic_json(const ServerTraffic& t) {
  return {{"bytes_in", t.bytes_in},
          {"bytes_out", t.bytes_out},
          {"queue_depth_max", t.queue_depth_max},
          {"queue_depth_mean", t.queue_depth_mean()}};
}

nlohmann::json interval_record(int index, const ServerInterval& i) {
  nlohmann::json j{{"event", "server_interval"}, {"server", index},
                   {"updates", i.updates},       {"interval_updates", i.interval_updates},
                   {"interval_s", i.seconds},    {"updates_per_s", i.updates_per_s()}};
  j.update(traffic_json(i.traffic));
  return j;
}

}  // namespace cohort::ps
