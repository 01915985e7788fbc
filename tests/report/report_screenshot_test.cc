// The report page drawn by a real browser: headless Chromium (Debian's chromium-headless-shell)
// renders it to a PNG offline. Skipped, with the reason, where the browser is not installed.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>

#include "cohort/report/report.h"
#include "tests/report/fixtures.h"

namespace {

namespace fs = std::filesystem;
constexpr const char* kBrowser = "/usr/bin/chromium-headless-shell";

// Width and height from a PNG's IHDR chunk (big-endian at bytes 16..23); {0, 0} if not a PNG.
std::pair<uint32_t, uint32_t> png_size(const std::string& b) {
  if (b.size() < 24 || b.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return {0, 0};
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = (v << 8) | uint8_t(b[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

TEST(ReportScreenshot, ChromiumRendersThePage) {
  if (!fs::exists(kBrowser)) GTEST_SKIP() << kBrowser << " not installed (chromium-headless-shell)";
  cohort::testing::TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  cohort::report::ReportOptions o{.run_dirs = {f.one.string(), f.two.string()},
                                  .figures = {.target_accuracy = 0.7}};
  std::string page = cohort::report::write_report(o).output;
  std::string png = t.file("report.png");
  // timeout: a browser that hangs fails the test instead of stalling the suite.
  std::string cmd = std::string("timeout 120 ") + kBrowser +
                    " --no-sandbox --headless --disable-gpu --screenshot=" + png +
                    " --window-size=1280,2400 --virtual-time-budget=3000 file://" + page + " > " +
                    t.file("browser.log") + " 2>&1";
  int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
      << cmd << "\n"
      << cohort::testing::read_bytes(t.file("browser.log"));
  std::string bytes = cohort::testing::read_bytes(png);
  EXPECT_EQ(png_size(bytes), std::make_pair(1280u, 2400u));
  // A blank 1280x2400 page compresses to a few KB; tables and charts take far more.
  EXPECT_GT(bytes.size(), 50000u);
}

}  // namespace
