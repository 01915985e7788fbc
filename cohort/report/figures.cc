#include "cohort/report/figures.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "cohort/core/error.h"

namespace cohort::report {
namespace {

using json = nlohmann::json;

// The per-step means a step or summary record carries (train/step_metrics.cc per_step_json).
const char* const kPhases[] = {"data_ms",      "forward_ms",      "backward_ms",
                               "optimizer_ms", "exposed_comm_ms", "comm_ms"};

// j[key] when it is a number, else null: the page shows "not recorded" for null.
json number_or_null(const json& j, const char* key) {
  if (j.is_object() && j.contains(key) && j[key].is_number()) return j[key];
  return nullptr;
}

// step -> record; a resumed run appends its records, so the last record of a step wins.
std::map<int64_t, const json*> by_step(const std::vector<json>& records) {
  std::map<int64_t, const json*> out;
  for (const json& r : records)
    if (r.contains("step") && r["step"].is_number_integer()) out[r["step"].get<int64_t>()] = &r;
  return out;
}

// Columns {key: [record[key] for each record]} over records in step order, plus "step".
json columns(const std::vector<json>& records, std::initializer_list<const char*> keys) {
  json out{{"step", json::array()}};
  for (const char* k : keys) out[k] = json::array();
  for (const auto& [step, r] : by_step(records)) {
    out["step"].push_back(step);
    for (const char* k : keys) out[k].push_back(number_or_null(*r, k));
  }
  return out;
}

double step_ms(const json& b) {
  return b.value("data_ms", 0.0) + b.value("forward_ms", 0.0) + b.value("backward_ms", 0.0) +
         b.value("optimizer_ms", 0.0);
}

// Job-wide samples/s: each rank's step record carries its own samples/s (running mean), so
// the job's is their sum, taken at the steps that every rank with step records logged.
json throughput(const RunData& run) {
  std::map<int64_t, std::pair<double, int>> sum;  // step -> (samples/s, ranks)
  int logging = 0;
  for (const auto& [rank, r] : run.ranks) {
    if (r.steps.empty()) continue;
    ++logging;
    for (const auto& [step, rec] : by_step(r.steps)) {
      sum[step].first += rec->value("samples_per_s", 0.0);
      ++sum[step].second;
    }
  }
  json out{{"step", json::array()}, {"samples_per_s", json::array()}};
  for (const auto& [step, s] : sum) {
    if (s.second != logging) continue;
    out["step"].push_back(step);
    out["samples_per_s"].push_back(s.first);
  }
  return out;
}

// A rank's per-step means over the run: its summary, else its step records' interval means
// weighted by the steps each covers. Null when the rank has logged nothing yet.
json rank_breakdown(int rank, const RankRecords& r) {
  json b{{"rank", rank}};
  if (r.summary.is_object()) {
    for (const char* k : kPhases) b[k] = r.summary.value(k, 0.0);
  } else {
    std::map<int64_t, const json*> steps = by_step(r.steps);
    if (steps.empty()) return nullptr;
    double n = 0;
    for (const char* k : kPhases) b[k] = 0.0;
    for (const auto& [step, rec] : steps) {
      double w = double(rec->value("steps", int64_t(1)));
      n += w;
      for (const char* k : kPhases) b[k] = b[k].get<double>() + w * rec->value(k, 0.0);
    }
    for (const char* k : kPhases) b[k] = b[k].get<double>() / std::max(n, 1.0);
  }
  b["step_ms"] = step_ms(b);
  b["backward_compute_ms"] = b["backward_ms"].get<double>() - b["exposed_comm_ms"].get<double>();
  return b;
}

json breakdown(const RunData& run) {
  json out = json::array();
  for (const auto& [rank, r] : run.ranks) {
    json b = rank_breakdown(rank, r);
    if (!b.is_null()) out.push_back(std::move(b));
  }
  return out;
}

// Rank 0's communication per logged interval, and the means over ranks with the hidden share
// (1 - exposed / comm; null when nothing was communicated).
json comm(const RunData& run, const json& ranks) {
  json c{{"step", json::array()},
         {"step_ms", json::array()},
         {"comm_ms", json::array()},
         {"exposed_ms", json::array()}};
  for (const auto& [step, r] : by_step(run.chief().steps)) {
    c["step"].push_back(step);
    c["step_ms"].push_back(step_ms(*r));
    c["comm_ms"].push_back(r->value("comm_ms", 0.0));
    c["exposed_ms"].push_back(r->value("exposed_comm_ms", 0.0));
  }
  double n = double(std::max<size_t>(ranks.size(), 1)), st = 0, cm = 0, ex = 0;
  for (const json& b : ranks) {
    st += b["step_ms"].get<double>() / n;
    cm += b["comm_ms"].get<double>() / n;
    ex += b["exposed_comm_ms"].get<double>() / n;
  }
  json hidden = cm > 0 ? json(std::clamp(1.0 - ex / cm, 0.0, 1.0)) : json(nullptr);
  c["mean"] = {{"step_ms", st}, {"comm_ms", cm}, {"exposed_ms", ex}, {"hidden_share", hidden}};
  return c;
}

// Each parameter server's last "server_summary" (metrics.server<i>.jsonl;
// train/roles/ps_server_role.cc), with null fields while it has written none.
json servers(const RunData& run) {
  json out = json::array();
  for (const auto& [index, records] : run.servers) {
    const json* last = nullptr;
    for (const json& r : records)
      if (r.value("event", "") == "server_summary") last = &r;
    json s{{"server", index}};
    for (const char* k : {"updates_per_s", "pushes", "dropped_pushes", "staleness_mean",
                          "staleness_max", "bytes_in", "bytes_out"})
      s[k] = last ? number_or_null(*last, k) : json(nullptr);
    out.push_back(std::move(s));
  }
  return out;
}

// The first evaluation (in step order) that reached `target`; null when none did.
const json* first_at_target(const RunData& run, double target) {
  if (target < 0) return nullptr;
  for (const auto& [step, e] : by_step(run.evals))
    if (e->contains("accuracy") && (*e)["accuracy"].is_number() &&
        (*e)["accuracy"].get<double>() >= target)
      return e;
  return nullptr;
}

// Energy, shown only where the records carry it (the summary's energy_* fields, the
// evaluations' energy_j); never estimated here. The whole job's (job_energy_j, every rank)
// where the summary has it, else rank 0's own.
json energy(const RunData& run, double target) {
  const json& s = run.chief().summary;
  json total = number_or_null(s, "job_energy_j");
  if (total.is_null()) total = number_or_null(s, "energy_j");
  json e = {{"recorded", total.is_number()},
            {"energy_j", total},
            {"energy_per_sample_j", number_or_null(s, "energy_per_sample_j")},
            {"comm_share", number_or_null(s, "energy_comm_share")},
            {"source", nullptr},
            {"estimate", false},
            {"to_target_j", nullptr}};
  if (s.is_object() && s.contains("energy_source") && s["energy_source"].is_string()) {
    e["source"] = s["energy_source"];
    e["estimate"] = s["energy_source"] == "model";
  }
  const json* hit = first_at_target(run, target);
  if (target < 0)
    e["to_target_note"] = "no --target-accuracy given";
  else if (!hit)
    e["to_target_note"] = "target accuracy not reached";
  else if (!number_or_null(*hit, "energy_j").is_number())
    e["to_target_note"] = "not recorded";
  else
    e["to_target_j"] = (*hit)["energy_j"], e["to_target_note"] = "";
  return e;
}

// The last value of `key` in the column set `cols` (null when empty).
json last_of(const json& cols, const char* key) {
  return cols[key].empty() ? json(nullptr) : cols[key].back();
}

json summary(const RunData& run, const json& f, double target) {
  const json& s = run.chief().summary;
  auto pick = [&](const char* key, json fallback) {
    json v = number_or_null(s, key);
    return v.is_null() ? fallback : v;
  };
  const json* hit = first_at_target(run, target);
  return {{"workers", run.workers()},
          {"strategy", run.strategy},
          {"steps", pick("steps", last_of(f["loss"], "step"))},
          {"final_accuracy", pick("eval_accuracy", last_of(f["eval"], "accuracy"))},
          {"final_loss", pick("eval_loss", last_of(f["eval"], "loss"))},
          {"wall_seconds", number_or_null(s, "wall_seconds")},
          {"train_seconds", number_or_null(s, "train_seconds")},
          {"samples_per_s", pick("samples_per_s", last_of(f["throughput"], "samples_per_s"))},
          {"time_to_target_s", hit ? number_or_null(*hit, "train_s") : json(nullptr)},
          {"running", !s.is_object()},
          // In-place recovery (docs/elastic.md): the summary's workers are those at the end.
          {"membership_changes", number_or_null(s, "membership_changes")},
          {"workers_at_end", number_or_null(s, "workers")}};
}

}  // namespace

json run_figures(const RunData& run, const FigureOptions& o) {
  const json& start = run.chief().start;
  json f{{"name", run.name},
         {"dir", run.dir},
         {"workers", run.workers()},
         {"threads", number_or_null(start, "threads")},
         {"strategy", run.strategy},
         {"model", start.is_object() ? start.value("model", "") : ""},
         {"parameters", number_or_null(start, "parameters")},
         {"warnings", run.warnings}};
  f["loss"] = columns(run.chief().steps, {"loss"});
  f["eval"] = columns(run.evals, {"train_s", "loss", "accuracy", "energy_j"});
  f["throughput"] = throughput(run);
  f["breakdown"] = breakdown(run);
  f["comm"] = comm(run, f["breakdown"]);
  f["servers"] = servers(run);
  f["energy"] = energy(run, o.target_accuracy);
  f["summary"] = summary(run, f, o.target_accuracy);
  return f;
}

namespace {

std::string plural(int64_t n, const char* one) {
  return detail::str(n, " ", one, n == 1 ? "" : "s");
}

// A scaling row with what the run spent its samples/s on: workers x threads = cores (null
// threads and cores for runs whose start record predates "threads").
json scaling_row(const json& f) {
  json threads = f["threads"];
  json cores = threads.is_number() ? json(f["workers"].get<int64_t>() * threads.get<int64_t>())
                                   : json(nullptr);
  return {{"run", f["name"]},
          {"workers", f["workers"]},
          {"threads", threads},
          {"cores", cores},
          {"samples_per_s", f["summary"]["samples_per_s"]},
          {"baseline", nullptr},
          {"baseline_threads", nullptr},
          {"efficiency", nullptr},
          {"efficiency_per_core", nullptr},
          {"note", ""}};
}

// "2 workers x 1 thread = 2 cores".
std::string resources(const json& row) {
  std::string s = plural(row["workers"].get<int64_t>(), "worker");
  if (!row["threads"].is_number()) return s + " (threads not recorded)";
  return detail::str(s, " x ", plural(row["threads"].get<int64_t>(), "thread"), " = ",
                     plural(row["cores"].get<int64_t>(), "core"));
}

// The 1-worker run to compare `row` with, among those of the same model: the first with the
// row's threads per worker, else the first at all (compare() then warns).
const json* pick_baseline(const json& row, const std::vector<json>& ones) {
  for (const json& b : ones)
    if (b["threads"] == row["threads"]) return &b;
  return ones.empty() ? nullptr : &ones.front();
}

// Fills row's baseline fields against the 1-worker row b. The per-worker efficiency assumes
// each worker brings what the 1-worker run had; when threads per worker differ it does not
// (a 2-thread worker against 1-thread workers), so a warning names both runs' resources and
// the per-core figure, which divides each run's samples/s by the cores it used.
void compare(json& row, const json& b, std::vector<std::string>* warnings) {
  double one = b["samples_per_s"].get<double>(), sps = row["samples_per_s"].get<double>();
  row["baseline"] = b["run"];
  row["baseline_threads"] = b["threads"];
  row["efficiency"] = sps / (row["workers"].get<double>() * one);
  if (!row["cores"].is_number() || !b["cores"].is_number()) {
    row["note"] = "threads per worker not recorded: the runs may have used unlike resources";
    return;
  }
  row["efficiency_per_core"] =
      (sps / row["cores"].get<double>()) / (one / b["cores"].get<double>());
  if (row["threads"] == b["threads"]) return;
  row["note"] = detail::str("threads per worker differ (", row["threads"].get<int64_t>(), " vs ",
                            b["threads"].get<int64_t>(), "): compare per core");
  warnings->push_back(
      detail::str("scaling: run '", row["run"].get<std::string>(), "' (", resources(row),
                  ") is compared with the 1-worker run '", b["run"].get<std::string>(), "' (",
                  resources(b), "): threads per worker differ, so its scaling efficiency of ",
                  std::lround(100 * row["efficiency"].get<double>()),
                  "% is not like with like; per core it is ",
                  std::lround(100 * row["efficiency_per_core"].get<double>()),
                  "%. For a fair comparison run both with the same --set run.threads=T"));
}

}  // namespace

json scaling_figures(const std::vector<json>& figs) {
  // Runs of the same model (type and parameter count) scale against a 1-worker run of it.
  auto key = [](const json& f) { return f["model"].dump() + "/" + f["parameters"].dump(); };
  std::map<std::string, std::vector<json>> ones;
  for (const json& f : figs)
    if (f["workers"] == 1 && f["summary"]["samples_per_s"].is_number())
      ones[key(f)].push_back(scaling_row(f));
  json rows = json::array();
  std::vector<std::string> warnings;
  for (const json& f : figs) {
    json row = scaling_row(f);
    const json* b = pick_baseline(row, ones[key(f)]);
    if (!b)
      row["note"] = "no 1-worker run of this model among the runs given";
    else if (!row["samples_per_s"].is_number())
      row["note"] = "no samples/s recorded yet";
    else
      compare(row, *b, &warnings);
    rows.push_back(std::move(row));
  }
  return {{"rows", rows}, {"warnings", warnings}};
}

json report_data(const std::vector<RunData>& runs, const FigureOptions& o) {
  json figs = json::array();
  for (const RunData& r : runs) figs.push_back(run_figures(r, o));
  json target = o.target_accuracy >= 0 ? json(o.target_accuracy) : json(nullptr);
  return {{"format", "cohort-report/1"},
          {"layout", o.layout == Layout::kCompare ? "compare" : "overlay"},
          {"target_accuracy", target},
          {"runs", figs},
          {"scaling", scaling_figures(figs.get<std::vector<json>>())}};
}

}  // namespace cohort::report
