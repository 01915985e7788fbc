#pragma once
// Dashboard: what `cohort train --dashboard` and `cohort run --dashboard` serve while the job
// runs (docs/monitoring.md).
//
//   workers --(records, service channel, job secret)--> stream server --> JobView
//   browser --(HTTP)--> GET /            the page (Chart.js served from Debian's copy)
//                       GET /api/state   JobView::snapshot() as JSON; the page polls it
//                       GET /metrics     Prometheus text format
//
// Both servers bind loopback unless `bind` names another address. Then every HTTP request must
// carry the job secret (hex) as `?token=` or `Authorization: Bearer`, since the page shows
// what the job does and the stream server takes records only from peers that know the secret.
// A stream message is one JSON object {"rank": R, "record": {...}} (metrics/stream_sink.h).
#include <cstdint>
#include <memory>
#include <string>

#include "cohort/monitor/job_view.h"
#include "cohort/net/secret.h"

namespace cohort::monitor {

struct DashboardOptions {
  std::string bind = "127.0.0.1";  // HTTP and stream servers; non-loopback needs the token
  uint16_t port = 0;               // HTTP port; 0: the OS picks one (printed)
  net::Secret secret;              // the job secret: required
  int workers = 0;
  std::string chart_js = "/usr/share/javascript/chart.js/chart.min.js";  // libjs-chart.js
  bool require_token = false;  // also on loopback (always off it)
};

class Dashboard {
 public:
  // Starts both servers. InvalidArgument for a missing secret; IoError naming the address if a
  // port cannot be bound.
  explicit Dashboard(DashboardOptions options);
  ~Dashboard();  // stop()
  Dashboard(const Dashboard&) = delete;
  Dashboard& operator=(const Dashboard&) = delete;

  // Stops serving; idempotent.
  void stop();
  // The page's address, e.g. "http://127.0.0.1:41234/" (with "?token=..." when exposed).
  std::string url() const;
  uint16_t port() const;
  // HOST:PORT of the stream server, for workers' COHORT_METRICS_STREAM.
  std::string stream_address() const;
  JobView& view() { return *view_; }

  class Impl;

 private:
  std::unique_ptr<JobView> view_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cohort::monitor
