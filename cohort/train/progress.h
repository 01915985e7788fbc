#pragma once
// Progress output for `cohort train`: a live one-line bar on a terminal (epoch, step, loss,
// samples/s, ETA), plain lines every `log_every` steps when output goes to a file or pipe.
#include <chrono>
#include <cstdint>
#include <string>

namespace cohort::train {

enum class ProgressMode { kBar, kPlain, kNone };
// "auto" picks kBar when stdout is a terminal, else kPlain.
ProgressMode progress_mode(const std::string& setting);

class Progress {
 public:
  Progress(ProgressMode mode, int64_t total_steps, int64_t log_every);
  // Called after each step; cheap when nothing is printed.
  void step(int64_t step, int64_t epoch, double loss, double samples_per_s);
  // A line that must not be overwritten by the bar (evaluation results, warnings).
  void line(const std::string& text);
  void finish();
  // Training also stops after this many seconds (train.time_limit_s): the ETA says so.
  void set_time_limit(double seconds) { time_limit_ = seconds; }
  // The run's steps changed (in-place recovery dealt the rest of an epoch to fewer workers).
  void set_total(int64_t total_steps) { total_ = total_steps; }
  // Whose output this is changed: a worker that took over as rank 0 prints from now on.
  void set_mode(ProgressMode mode) { mode_ = mode; }

 private:
  void draw(int64_t step, int64_t epoch, double loss, double samples_per_s);
  ProgressMode mode_;
  int64_t total_;
  int64_t log_every_;
  bool bar_visible_ = false;
  double time_limit_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);

}  // namespace cohort::train
