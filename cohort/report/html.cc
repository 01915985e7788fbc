#include "cohort/report/html.h"

#include <fstream>
#include <sstream>

#include "cohort/core/error.h"

namespace cohort::report {
namespace {

constexpr const char* kDataOpen = R"(<script type="application/json" id="cohort-data">)";
constexpr const char* kScriptClose = "</script>";

constexpr const char* kStyle = R"(
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1400px; }
h1 { margin-bottom: 4px; } h2 { margin-top: 32px; border-bottom: 1px solid #ddd; }
.sub, .note { color: #666; } .warn { color: #a40; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 4px 10px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.section { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 0 24px; }
.section > table, .section > p, .section > .row:not(.single) { grid-column: 1 / -1; }
.section > table { justify-self: start; }
.row { display: grid; grid-template-columns: repeat(var(--cols), minmax(0, 1fr)); gap: 16px; }
.panel { min-width: 0; } .panel h3 { font-size: 14px; margin: 8px 0; }
.panel canvas { width: 100% !important; height: 260px !important; }
.estimate { background: #fff3cd; padding: 1px 6px; border-radius: 4px; }
)";

// "<" only appears inside JSON strings, where \u003c means the same: so no run name or warning
// can close the <script> element early.
std::string json_for_script(const nlohmann::json& data) {
  std::string in = data.dump(), out;
  out.reserve(in.size());
  for (char c : in) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

// Chart.js must not contain "</script" (3.9.1 does not); escaped if it ever does.
std::string js_for_script(std::string js) {
  for (size_t p = 0; (p = js.find("</script", p)) != std::string::npos; p += 2)
    js.replace(p, 2, "<\\/");
  return js;
}

}  // namespace

std::string default_chartjs_path() {
  return COHORT_CHARTJS_PATH;
}

std::string load_chartjs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  COHORT_CHECK_IO(in.good(), "cannot read Chart.js at '", path,
                  "': install Debian's libjs-chart.js (scripts/install-deps.sh) or pass "
                  "--chartjs PATH");
  std::ostringstream s;
  s << in.rdbuf();
  COHORT_CHECK_IO(s.str().find("Chart") != std::string::npos, "'", path,
                  "' does not look like Chart.js");
  return s.str();
}

std::string render_html(const nlohmann::json& data, const std::string& chartjs) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<title>cohort report</title>\n<style>" << kStyle << "</style>\n"
    << "<script>\n"
    << js_for_script(chartjs) << "\n</script>\n</head>\n<body>\n"
    << "<h1>cohort report</h1>\n<div class=\"sub\" id=\"runs\"></div>\n"
    << "<div id=\"warnings\"></div>\n"
    << "<h2>Summary</h2><div class=\"section\" id=\"summary\"></div>\n"
    << "<h2>Configuration</h2><div class=\"section\" id=\"config\"></div>\n"
    << "<h2>Loss and accuracy</h2><div class=\"section\" id=\"curves\"></div>\n"
    << "<h2>Step breakdown and throughput</h2><div class=\"section\" id=\"speed\"></div>\n"
    << "<h2>Scaling efficiency</h2><div class=\"section\" id=\"scaling\"></div>\n"
    << "<h2>Communication overhead</h2><div class=\"section\" id=\"comm\"></div>\n"
    << "<h2>Energy</h2><div class=\"section\" id=\"energy\"></div>\n"
    << kDataOpen << json_for_script(data) << kScriptClose << "\n"
    << "<script>\n"
    << page_script() << "\n</script>\n</body>\n</html>\n";
  return h.str();
}

nlohmann::json embedded_data(const std::string& html) {
  size_t open = html.find(kDataOpen);
  COHORT_CHECK_ARG(open != std::string::npos, "no cohort-data block in the page");
  size_t begin = open + std::string(kDataOpen).size();
  size_t end = html.find(kScriptClose, begin);
  COHORT_CHECK_ARG(end != std::string::npos, "the cohort-data block is not closed");
  return nlohmann::json::parse(html.substr(begin, end - begin));
}

}  // namespace cohort::report
