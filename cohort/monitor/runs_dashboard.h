#pragma once
// The dashboard of past runs (`cohort dashboard RUN_DIR...`, docs/monitoring.md): the live
// dashboard's page and web server (dashboard_http.h: loopback by default, the token off it),
// serving finished runs replayed from their files (replay.h) instead of a running job.
//
//   GET /                the page; with several runs it lists them, overlays their curves and
//                        shows the selected one as the live page shows a job
//   GET /api/state       runs_state(): every run, each with its view's snapshot
//   GET /api/state?run=N one run's snapshot alone, the live /api/state's shape (N: its name)
//
// The runs are read once: the views do not change while it serves.
#include <memory>
#include <string>
#include <vector>

#include "cohort/monitor/dashboard_http.h"
#include "cohort/monitor/job_view.h"

namespace cohort::monitor {

struct PastRun {
  std::string name;  // unique among the runs served (the page's selector, ?run=)
  std::string dir;
  Json info = Json::object();  // shown beside the run: strategy, differing config, warnings
  std::unique_ptr<JobView> view;
};

// {"mode": "runs", "runs": [{"name", "dir", <info's fields>, "state": snapshot}, ...]}.
Json runs_state(const std::vector<PastRun>& runs);

class RunsDashboard {
 public:
  // Starts serving `runs` (at least one, with distinct names; InvalidArgument otherwise).
  // Errors as DashboardHttp's.
  RunsDashboard(DashboardHttpOptions options, std::vector<PastRun> runs);

  void stop() { http_->stop(); }
  std::string url() const { return http_->url(); }
  uint16_t port() const { return http_->port(); }
  const std::vector<PastRun>& runs() const { return runs_; }

 private:
  HttpReply state(const HttpParams& params) const;

  std::vector<PastRun> runs_;
  std::unique_ptr<DashboardHttp> http_;  // after runs_: its routes read them until stopped
};

}  // namespace cohort::monitor
