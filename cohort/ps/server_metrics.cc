#include "cohort/ps/server_metrics.h"

#include <algorithm>

namespace cohort::ps {

void ServerMetrics::received(size_t bytes) {
  bytes_.add_in(bytes);
}

void ServerMetrics::sent(size_t bytes) {
  bytes_.add_out(bytes);
}

ServerTraffic ServerMetrics::total() const {
  ServerTraffic t = total_;
  const ByteCounts b = bytes_.total();
  t.bytes_in = b.bytes_in;
  t.bytes_out = b.bytes_out;
  return t;
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
  const ByteCounts b = bytes_.take_interval();
  i.traffic.bytes_in = b.bytes_in;
  i.traffic.bytes_out = b.bytes_out;
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
