#include "cohort/train/run_dir.h"

#include <charconv>
#include <filesystem>

#include "cohort/comm/process_group.h"
#include "cohort/core/error.h"

namespace cohort::train {
namespace {

namespace fs = std::filesystem;

// N of a sibling "<name>.<N>" (N >= 2), else 0.
int64_t sibling_number(const std::string& entry, const std::string& name) {
  if (entry.size() <= name.size() + 1 || entry.compare(0, name.size(), name) != 0 ||
      entry[name.size()] != '.')
    return 0;
  const char* b = entry.data() + name.size() + 1;
  const char* e = entry.data() + entry.size();
  int64_t n = 0;
  auto [p, ec] = std::from_chars(b, e, n);
  return ec == std::errc() && p == e && *b != '0' && n >= 2 ? n : 0;
}

// The highest N of an existing directory <parent>/<name>.<N>, or 0 when there is none.
int64_t newest_number(const fs::path& parent, const std::string& name) {
  int64_t highest = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    std::error_code ec2;
    if (e.is_directory(ec2))
      highest = std::max(highest, sibling_number(e.path().filename().string(), name));
  }
  return highest;
}

bool absent_or_empty(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return true;
  return fs::is_directory(dir, ec) && fs::is_empty(dir, ec) && !ec;
}

fs::path numbered(const fs::path& base, int64_t n) {
  return base.parent_path() / (base.filename().string() + "." + std::to_string(n));
}

void create(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  COHORT_CHECK_IO(!ec, "cannot create run directory '", dir.string(),
                  "' (run.dir/run.name): ", ec.message());
}

}  // namespace

RunDir choose_run_dir(const std::string& parent, const std::string& name, RunStart start) {
  const fs::path base = fs::path(parent) / name;
  create(base.parent_path().empty() ? fs::path(".") : base.parent_path());
  const int64_t newest = newest_number(base.parent_path().empty() ? "." : base.parent_path(), name);
  if (start == RunStart::kContinue) {
    const fs::path dir = newest > 0 ? numbered(base, newest) : base;
    create(dir);
    return {dir.string(), base.string(), start};
  }
  // A fresh run takes the base only while no numbered sibling exists: the newest directory of
  // the name must always be the latest fresh run's, which `--resume auto` continues.
  if (newest == 0 && absent_or_empty(base)) {
    create(base);
    return {base.string(), base.string(), start};
  }
  // Claimed by mkdir, which fails for a directory that exists (another run's, even if it was
  // created a moment ago): then the next number.
  for (int64_t n = std::max<int64_t>(newest + 1, 2);; ++n) {
    const fs::path dir = numbered(base, n);
    std::error_code ec;
    if (fs::create_directory(dir, ec)) return {dir.string(), base.string(), start};
    COHORT_CHECK_IO(!ec, "cannot create run directory '", dir.string(), "': ", ec.message());
  }
}

RunStart run_start(const Config& cfg, int restarts) {
  return !cfg.get_string("run.resume").empty() || restarts > 0 ? RunStart::kContinue
                                                               : RunStart::kFresh;
}

std::string numbered_run_notice(const RunDir& d) {
  return "cohort train: " + d.base + " holds an earlier run, left as it is; this run writes " +
         d.path + " (--resume auto continues the newest run of this name; run.name names another)";
}

void set_run_dir(Config& cfg, const std::string& dir) {
  const fs::path p(dir);
  const std::string parent = p.parent_path().empty() ? "." : p.parent_path().string();
  cfg.set("run.dir", parent, "the run directory chosen (" + dir + ")");
  cfg.set("run.name", p.filename().string(), "the run directory chosen (" + dir + ")");
}

std::string agree_on_run_dir(const TrainWorld& world, const std::string& chosen, double timeout_s) {
  if (!world.joined) return chosen;
  const auto timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000.0));
  if (const auto& store = world.joined->store.store) {  // native backend
    if (world.is_chief()) store->set_string(kRunDirStoreKey, chosen);
    return world.size > 1 ? store->get_string(kRunDirStoreKey, timeout) : chosen;
  }
  if (world.size <= 1) return chosen;
  // MPI: no store; the group broadcasts the length, then the bytes.
  comm::ProcessGroup& g = *world.joined->group;
  int64_t n = int64_t(chosen.size());
  g.broadcast({.buffer = &n, .count = 1, .dtype = DType::i64, .root = 0, .timeout = timeout});
  std::string dir = world.is_chief() ? chosen : std::string(size_t(n), '\0');
  if (n > 0)
    g.broadcast({.buffer = dir.data(),
                 .count = size_t(n),
                 .dtype = DType::u8,
                 .root = 0,
                 .timeout = timeout});
  return dir;
}

}  // namespace cohort::train
