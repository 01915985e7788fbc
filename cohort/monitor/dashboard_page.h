#pragma once
// The dashboard's one page: HTML, CSS and the script that polls /api/state once a second and
// draws it with Chart.js (served by the dashboard itself, so the page works offline). When
// /api/state lists past runs ("mode": "runs", runs_dashboard.h) it reads it once, shows the runs
// in a table with their curves overlaid, and the selected run as the live page shows a job.
#include <string>

namespace cohort::monitor {

const std::string& dashboard_page();

}  // namespace cohort::monitor
