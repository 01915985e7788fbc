#include "cohort/monitor/runs_dashboard.h"

#include <set>

#include "cohort/core/error.h"

namespace cohort::monitor {

Json runs_state(const std::vector<PastRun>& runs) {
  Json list = Json::array();
  for (const PastRun& r : runs) {
    Json one = r.info.is_object() ? r.info : Json::object();
    one["name"] = r.name;
    one["dir"] = r.dir;
    one["state"] = r.view ? r.view->snapshot() : Json::object();
    list.push_back(std::move(one));
  }
  return Json{{"mode", "runs"}, {"runs", std::move(list)}};
}

RunsDashboard::RunsDashboard(DashboardHttpOptions options, std::vector<PastRun> runs)
    : runs_(std::move(runs)) {
  COHORT_CHECK_ARG(!runs_.empty(), "dashboard: no runs to show");
  std::set<std::string> names;
  for (const PastRun& r : runs_) {
    COHORT_CHECK_ARG(r.view != nullptr, "dashboard: run '", r.name, "' has no view");
    COHORT_CHECK_ARG(names.insert(r.name).second, "dashboard: two runs are named '", r.name, "'");
  }
  http_ = std::make_unique<DashboardHttp>(
      std::move(options), std::map<std::string, HttpRoute>{
                              {"/api/state", [this](const HttpParams& p) { return state(p); }}});
}

namespace {

// A directory's name need not be UTF-8, which JSON text must be: such bytes become U+FFFD.
std::string json_text(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

HttpReply RunsDashboard::state(const HttpParams& params) const {
  auto it = params.find("run");
  if (it == params.end()) return {.body = json_text(runs_state(runs_))};
  for (const PastRun& r : runs_)
    if (r.name == it->second) return {.body = json_text(r.view->snapshot())};
  return {.status = 404, .body = Json{{"error", "no run named '" + it->second + "'"}}.dump()};
}

}  // namespace cohort::monitor
