#pragma once
// The report page: one self-contained HTML file. Chart.js is inlined (no network), the figures
// are embedded as JSON in <script type="application/json" id="cohort-data">, and a small script
// (page_script.cc) draws them.
#include <string>

#include <nlohmann/json.hpp>

namespace cohort::report {

// Where Chart.js was found at build time (Debian's libjs-chart.js).
std::string default_chartjs_path();

// Chart.js's text. IoError naming the path, and the package or flag that provides it, when the
// file cannot be read.
std::string load_chartjs(const std::string& path);

// The page for `data` (report_data's block) with `chartjs` inlined.
std::string render_html(const nlohmann::json& data, const std::string& chartjs);

// The data block embedded in a page render_html wrote. InvalidArgument when there is none.
nlohmann::json embedded_data(const std::string& html);

// The script that draws the figures from the data block (page_script.cc).
const char* page_script();

}  // namespace cohort::report
