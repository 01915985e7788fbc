#include "cohort/train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "cohort/core/error.h"

namespace cohort::train {

ProgressMode progress_mode(const std::string& s) {
  if (s == "bar") return ProgressMode::kBar;
  if (s == "plain") return ProgressMode::kPlain;
  if (s == "none") return ProgressMode::kNone;
  return isatty(STDOUT_FILENO) ? ProgressMode::kBar : ProgressMode::kPlain;
}

std::string format_duration(double s) {
  if (s < 0 || s != s) return "?";
  int64_t t = int64_t(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", long(t / 3600), long(t / 60 % 60));
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", long(t / 60), long(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%lds", long(t));
  return buf;
}

Progress::Progress(ProgressMode mode, int64_t total_steps, int64_t log_every)
    : mode_(mode),
      total_(total_steps),
      log_every_(log_every),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void Progress::step(int64_t step, int64_t epoch, double loss, double samples_per_s) {
  if (mode_ == ProgressMode::kNone) return;
  auto now = std::chrono::steady_clock::now();
  if (mode_ == ProgressMode::kBar) {
    // Redraw at most 10 times a second: printing every step would cost more than the step.
    if (now - last_draw_ < std::chrono::milliseconds(100) && step != total_) return;
  } else if (step % log_every_ != 0 && step != total_) {
    return;
  }
  last_draw_ = now;
  draw(step, epoch, loss, samples_per_s);
}

void Progress::draw(int64_t step, int64_t epoch, double loss, double sps) {
  double elapsed = std::chrono::duration<double>(last_draw_ - start_).count();
  double eta = step > 0 && total_ > 0 ? elapsed / double(step) * double(total_ - step) : -1;
  if (time_limit_ > 0) eta = std::min(eta < 0 ? time_limit_ : eta, time_limit_ - elapsed);
  std::string steps = total_ > 0 ? detail::str(step, "/", total_) : detail::str(step);
  if (mode_ == ProgressMode::kPlain) {
    std::printf("epoch %ld step %s loss %.4f %.0f samples/s eta %s\n", long(epoch), steps.c_str(),
                loss, sps, format_duration(eta).c_str());
    std::fflush(stdout);
    return;
  }
  const int width = 24;
  int filled = total_ > 0 ? int(double(width) * double(step) / double(total_)) : 0;
  std::string bar(size_t(filled), '#');
  bar.resize(size_t(width), '.');
  std::printf("\r\033[2Kepoch %ld [%s] %s loss %.4f %.0f samples/s eta %s", long(epoch),
              bar.c_str(), steps.c_str(), loss, sps, format_duration(eta).c_str());
  std::fflush(stdout);
  bar_visible_ = true;
}

void Progress::line(const std::string& text) {
  if (bar_visible_) std::printf("\r\033[2K");
  bar_visible_ = false;
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

void Progress::finish() {
  if (bar_visible_) std::printf("\n");
  bar_visible_ = false;
  std::fflush(stdout);
}

}  // namespace cohort::train
