#include "cohort/monitor/prometheus.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>

namespace cohort::monitor {
namespace {

// A number as Prometheus reads it: integers without a fraction, NaN and infinities by name.
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // the shortest exact form
  return std::string(buf, end);
}

class Writer {
 public:
  // One metric family: its HELP and TYPE lines, then one sample per rank.
  void family(const std::string& name, const std::string& type, const std::string& help,
              const std::map<int, RankTotals>& ranks,
              const std::function<double(const RankTotals&)>& value) {
    header(name, type, help);
    for (const auto& [rank, t] : ranks)
      out_ << name << "{rank=\"" << rank << "\"} " << number(value(t)) << "\n";
  }
  void single(const std::string& name, const std::string& type, const std::string& help,
              double value) {
    header(name, type, help);
    out_ << name << " " << number(value) << "\n";
  }
  void histogram(const std::map<int, RankTotals>& ranks) {
    const std::string name = "cohort_step_seconds";
    header(name, "histogram", "Step time (data + forward + backward + optimizer), per rank");
    for (const auto& [rank, t] : ranks) {
      const std::string r = "rank=\"" + std::to_string(rank) + "\"";
      for (size_t b = 0; b < kStepBuckets.size(); ++b)
        out_ << name << "_bucket{" << r << ",le=\"" << number(kStepBuckets[b]) << "\"} "
             << t.bucket_counts[b] << "\n";
      out_ << name << "_bucket{" << r << ",le=\"+Inf\"} " << t.step_count << "\n";
      out_ << name << "_sum{" << r << "} " << number(t.step_seconds_sum) << "\n";
      out_ << name << "_count{" << r << "} " << t.step_count << "\n";
    }
  }
  std::string str() const { return out_.str(); }

 private:
  void header(const std::string& name, const std::string& type, const std::string& help) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  std::ostringstream out_;
};

double field(const RankTotals& t, const char* key) {
  return number_in(t.last_step, key);
}

}  // namespace

std::string prometheus_text(const JobView& view) {
  const std::map<int, RankTotals> ranks = view.totals();
  Writer w;
  w.family("cohort_samples_total", "counter",
           "Samples trained, per rank (steps redone after a restart count again)", ranks,
           [](const RankTotals& t) { return double(t.samples_counted); });
  w.family("cohort_bytes_sent_total", "counter", "Bytes this rank sent for training", ranks,
           [](const RankTotals& t) { return double(t.bytes_sent); });
  w.family("cohort_bytes_received_total", "counter", "Bytes this rank received for training", ranks,
           [](const RankTotals& t) { return double(t.bytes_received); });
  w.family("cohort_energy_joules_total", "counter",
           "Energy of this rank (measured with RAPL or estimated: see energy_source)", ranks,
           [](const RankTotals& t) { return t.energy_j; });
  w.histogram(ranks);
  w.family("cohort_step", "gauge", "Last step reported", ranks,
           [](const RankTotals& t) { return double(t.step); });
  w.family("cohort_loss", "gauge", "Training loss of the last step reported", ranks,
           [](const RankTotals& t) { return field(t, "loss"); });
  w.family("cohort_samples_per_second", "gauge", "This rank's training throughput", ranks,
           [](const RankTotals& t) { return field(t, "samples_per_s"); });
  w.family("cohort_learning_rate", "gauge", "Learning rate of the last step reported", ranks,
           [](const RankTotals& t) { return field(t, "lr"); });
  w.family("cohort_exposed_comm_seconds", "gauge",
           "Communication per step not hidden behind computation (interval mean)", ranks,
           [](const RankTotals& t) { return 1e-3 * field(t, "exposed_comm_ms"); });
  w.family("cohort_straggler", "gauge", "1 for the rank last named a straggler", ranks,
           [](const RankTotals& t) { return t.straggler ? 1.0 : 0.0; });
  w.single("cohort_workers", "gauge", "Workers in the job", double(view.workers()));
  w.single("cohort_restarts_total", "counter", "Restarts of the job by the launcher",
           double(view.restarts()));
  return w.str();
}

}  // namespace cohort::monitor
