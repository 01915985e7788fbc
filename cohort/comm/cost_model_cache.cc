// calibrate_cost_model(): the on-disk cache of measured cost models (protocol in cost_model.h).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cohort/comm/collectives.h"
#include "cohort/comm/cost_model.h"
#include "cohort/core/logging.h"

namespace cohort::comm {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int kCacheVersion = 1;

// Same on every rank (collective): the transport mix is summed over all ranks by an
// allreduce, the topology is identical everywhere, and rank 0's host name is broadcast.
std::string cache_key(Communicator& c) {
  int64_t pairs[3] = {0, 0, 0};  // shm, tcp, other
  for (int peer = 0; peer < c.size(); ++peer) {
    if (peer == c.rank()) continue;
    std::string kind = c.transport_of(peer);
    pairs[kind == "shm" ? 0 : kind == "tcp" ? 1 : 2] += 1;
  }
  allreduce(c, {.output = pairs, .count = 3, .dtype = DType::i64});
  std::ostringstream key;
  key << "n=" << c.size() << " transports=";
  const char* names[3] = {"shm", "tcp", "other"};
  bool first = true;
  for (int i = 0; i < 3; ++i) {
    if (pairs[i] == 0) continue;
    key << (first ? "" : ",") << names[i] << ":" << pairs[i];
    first = false;
  }
  char host[256] = {};
  if (c.rank() == 0 && gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  broadcast(c, {.buffer = host, .count = sizeof host, .dtype = DType::u8, .root = 0});
  key << " hosts=" << c.topology().describe() << " on " << host;
  return key.str();
}

bool valid_figure(const json& v) {
  return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0;
}

// The whole file, or an empty object if it does not exist. Throws InvalidArgument (caught by
// the caller and turned into a warning) when it exists but is not a cache file.
json read_cache(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    COHORT_CHECK_IO(!fs::exists(path), "cannot open for reading");
    return json::object();
  }
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  COHORT_CHECK_ARG(!doc.is_discarded(), "not valid JSON");
  COHORT_CHECK_ARG(doc.is_object() && doc.value("version", 0) == kCacheVersion &&
                       doc.contains("entries") && doc["entries"].is_object(),
                   "expected {\"version\": ", kCacheVersion, ", \"entries\": {...}}");
  return doc;
}

// The entry for `key`, validated; nullopt when absent. Throws InvalidArgument when malformed.
std::optional<CostModel> find_entry(const json& doc, const std::string& key) {
  if (!doc.contains("entries") || !doc["entries"].contains(key)) return std::nullopt;
  const json& e = doc["entries"][key];
  COHORT_CHECK_ARG(e.is_object() && valid_figure(e.value("alpha_us", json())) &&
                       valid_figure(e.value("beta_us_per_byte", json())) &&
                       valid_figure(e.value("gamma_us_per_byte", json())),
                   "entry '", key, "' needs positive alpha_us, beta_us_per_byte and ",
                   "gamma_us_per_byte, got ", e.dump());
  return CostModel{e["alpha_us"].get<double>(), e["beta_us_per_byte"].get<double>(),
                   e["gamma_us_per_byte"].get<double>()};
}

// Adds (or replaces) the entry and writes the file atomically: temporary file beside it,
// flushed, then renamed over it.
void write_entry(json doc, const std::string& path, const std::string& key, const CostModel& m) {
  if (!doc.is_object() || !doc.contains("entries")) doc = json::object();
  doc["version"] = kCacheVersion;
  if (!doc.contains("entries")) doc["entries"] = json::object();
  doc["entries"][key] = {{"alpha_us", m.alpha_us},
                         {"beta_us_per_byte", m.beta_us_per_byte},
                         {"gamma_us_per_byte", m.gamma_us_per_byte}};
  fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." +
                    std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::trunc);
    COHORT_CHECK_IO(out.good(), "cannot create ", tmp);
    out << doc.dump(2) << "\n";
    out.flush();
    COHORT_CHECK_IO(out.good(), "cannot write ", tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp);
  COHORT_CHECK_IO(!ec, "cannot rename ", tmp, " to ", path, ": ", ec.message());
}

void warn(CalibrationInfo& info, const std::string& message) {
  info.warning = message;
  log::warn("comm", message);
}

// Rank 0: the cached model, or nullopt (measure). Never throws: a bad file is a warning.
std::optional<CostModel> load(const CalibrationOptions& o, const std::string& key, json& doc,
                              CalibrationInfo& info) {
  try {
    doc = read_cache(o.cache_path);
    return find_entry(doc, key);
  } catch (const std::exception& e) {
    doc = json::object();  // rewritten from scratch after measuring
    warn(info, detail::str("cost model cache ", o.cache_path, " ignored (", e.what(),
                           "); measuring again and rewriting it"));
    return std::nullopt;
  }
}

}  // namespace

CostModel calibrate_cost_model(Communicator& c, const CalibrationOptions& o, CalibrationInfo* out) {
  CalibrationInfo info;
  if (c.size() == 1) {
    if (out) *out = info;
    return c.cost_model();
  }
  info.key = cache_key(c);
  // figures: {1 if loaded from the cache, alpha, beta, gamma}, decided by rank 0.
  double figures[4] = {0, 0, 0, 0};
  json doc = json::object();
  if (c.rank() == 0 && !o.cache_path.empty() && !o.force_measure) {
    if (auto m = load(o, info.key, doc, info)) {
      figures[0] = 1;
      figures[1] = m->alpha_us;
      figures[2] = m->beta_us_per_byte;
      figures[3] = m->gamma_us_per_byte;
    }
  } else if (c.rank() == 0 && !o.cache_path.empty()) {
    load(o, info.key, doc, info);  // keep the other entries when overwriting ours
  }
  broadcast(c, {.buffer = figures, .count = 4, .dtype = DType::f64, .root = 0});
  CostModel m;
  if (figures[0] == 1) {
    m = CostModel{figures[1], figures[2], figures[3]};
    c.set_cost_model(m);
  } else {
    m = measure_cost_model(c, o.measure);
    info.measured = true;
    if (c.rank() == 0 && !o.cache_path.empty()) {
      try {
        write_entry(std::move(doc), o.cache_path, info.key, m);
      } catch (const std::exception& e) {
        warn(info, detail::str("cannot write the cost model cache ", o.cache_path, ": ", e.what(),
                               " (the measured model is used for this run)"));
      }
    }
  }
  if (c.rank() == 0)
    log::info("comm", "cost model ", info.measured ? "measured" : "loaded from " + o.cache_path,
              " for '", info.key, "': ", m.describe());
  if (out) *out = info;
  return m;
}

std::string default_cost_model_cache(const std::string& home) {
  return (fs::path(home) / ".cache" / "cohort" / "cost_model.json").string();
}

}  // namespace cohort::comm
