#pragma once
// The dashboard's one page: HTML, CSS and the script that polls /api/state once a second and
// draws it with Chart.js (served by the dashboard itself, so the page works offline).
#include <string>

namespace cohort::monitor {

const std::string& dashboard_page();

}  // namespace cohort::monitor
