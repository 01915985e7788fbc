#include "cohort/report/report.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cohort/core/error.h"
#include "cohort/report/config_diff.h"
#include "cohort/report/html.h"
#include "cohort/report/run_data.h"

namespace cohort::report {

ReportResult write_report(const ReportOptions& o) {
  COHORT_CHECK_ARG(!o.run_dirs.empty(), "cohort report: give at least one run directory");
  // Chart.js first: a missing package should fail before any work is done.
  std::string chartjs =
      load_chartjs(o.chartjs_path.empty() ? default_chartjs_path() : o.chartjs_path);
  std::vector<RunData> runs;
  ReportResult r;
  for (const std::string& d : o.run_dirs) {
    runs.push_back(read_run(d));
    r.warnings.insert(r.warnings.end(), runs.back().warnings.begin(), runs.back().warnings.end());
  }
  r.output =
      o.output.empty() ? (std::filesystem::path(o.run_dirs[0]) / "report.html").string() : o.output;
  nlohmann::json data = report_data(runs, o.figures);
  const ConfigDiff diff = config_diff(runs);
  data["config_diff"] = to_json(diff);
  r.config_diff = to_text(diff);
  for (const nlohmann::json& w : data["scaling"]["warnings"]) r.warnings.push_back(w);
  std::string page = render_html(data, chartjs);
  // Written beside and renamed, so a reader never sees half a page.
  std::string tmp = r.output + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    COHORT_CHECK_IO(out.good(), "cannot write report '", tmp, "': ", std::strerror(errno));
    out << page;
    COHORT_CHECK_IO(out.good(), "cannot write report '", tmp, "': ", std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, r.output, ec);
  COHORT_CHECK_IO(!ec, "cannot rename '", tmp, "' to '", r.output, "': ", ec.message());
  return r;
}

}  // namespace cohort::report
