// CheckpointManager: the save side (snapshot, atomic write, retention) and list().
#include "cohort/ckpt/checkpoint.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <set>

#include "cohort/ckpt/file_io.h"
#include "cohort/ckpt/manifest.h"
#include "cohort/core/logging.h"

namespace cohort::ckpt {
namespace fs = std::filesystem;
using namespace internal;

namespace internal {

std::optional<int64_t> parse_step_dir(const std::string& name) {
  const std::string prefix = "step-";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return {};
  int64_t step = 0;
  const char* b = name.data() + prefix.size();
  const char* e = name.data() + name.size();
  auto [p, ec] = std::from_chars(b, e, step);
  if (ec != std::errc() || p != e || *b == '-' || *b == '+') return {};
  return step;
}

std::vector<StepDir> scan_step_dirs(const std::string& dir) {
  std::vector<StepDir> out;
  std::error_code ec;
  for (const auto& ent : fs::directory_iterator(dir, ec)) {
    std::error_code ec2;
    if (!ent.is_directory(ec2)) continue;
    if (auto step = parse_step_dir(ent.path().filename().string()))
      out.push_back({*step, ent.path().string()});
  }
  std::sort(out.begin(), out.end(), [](const StepDir& a, const StepDir& b) {
    return a.step != b.step ? a.step < b.step : a.path < b.path;
  });
  return out;
}

}  // namespace internal

namespace {

// What a background save owns: bit-exact copies of the tensors and the serialized state.
struct Snapshot {
  int64_t step = 0;
  NamedTensors model, optimizer;
  std::map<std::string, NamedTensors> extra;
  std::string state_text;
};

void check_names(const char* which, const NamedTensors& tensors) {
  std::set<std::string> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    COHORT_CHECK_ARG(!name.empty(), "checkpoint ", which, ": tensor #", i, " has an empty name");
    COHORT_CHECK_ARG(seen.insert(name).second, "checkpoint ", which, ": duplicate tensor name '",
                     name, "'");
    COHORT_CHECK_ARG(t.defined(), "checkpoint ", which, ": tensor '", name, "' is undefined");
  }
}

void check_extra_names(const std::map<std::string, NamedTensors>& extra) {
  for (const auto& [name, tensors] : extra) {
    const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
    COHORT_CHECK_ARG(plain && name != "model" && name != "optimizer" && name[0] != '.',
                     "checkpoint: extra file name '", name,
                     "' must be letters, digits, '.', '_' or '-', and not model or optimizer");
    check_names(name.c_str(), tensors);
  }
}

NamedTensors copy_tensors(const NamedTensors& in) {
  NamedTensors out;
  out.reserve(in.size());
  for (const auto& [name, t] : in) out.emplace_back(name, internal::contiguous_copy(t));
  return out;
}

// The CPU's tensors as they are (handles: a synchronous save writes before returning), a GPU's
// copied to the host.
NamedTensors on_host(const NamedTensors& in) {
  NamedTensors out;
  out.reserve(in.size());
  for (const auto& [name, t] : in)
    out.emplace_back(name, t.device().is_cpu() ? t : internal::contiguous_copy(t));
  return out;
}

void remove_dir(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  COHORT_CHECK_IO(!ec, "cannot remove ", p.string(), ": ", ec.message());
}

// A pid that still runs on this host (or that we may not signal, which also means it exists).
bool pid_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(pid_t(pid), 0) == 0 || errno == EPERM;
}

// The pid a ".tmp-step-<N>-<pid>" directory was written by, or -1.
long tmp_dir_pid(const std::string& name) {
  const auto dash = name.rfind('-');
  if (dash == std::string::npos) return -1;
  long pid = -1;
  const char* e = name.data() + name.size();
  auto [p, ec] = std::from_chars(name.data() + dash + 1, e, pid);
  return ec == std::errc() && p == e ? pid : -1;
}

void write_manifest(const fs::path& tmp, int64_t step, const std::vector<std::string>& names) {
  nlohmann::ordered_json files = nlohmann::ordered_json::object();
  for (const std::string& name : names) {
    uint64_t size = 0;
    const std::string sha = internal::sha256_file((tmp / name).string(), &size);
    files[name] = {{"size", size}, {"sha256", sha}};
  }
  nlohmann::ordered_json m{
      {"format", kFormat}, {"version", kFormatVersion}, {"step", step}, {"files", files}};
  const std::string path = (tmp / kManifest).string();
  internal::write_text_file(path, m.dump(2) + "\n");
  internal::fsync_path(path);
}

}  // namespace

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%010lld", static_cast<long long>(step));
  return buf;
}

CheckpointManager::CheckpointManager(ManagerOptions options) : options_(std::move(options)) {
  COHORT_CHECK_ARG(!options_.dir.empty(), "CheckpointManager: options.dir is empty");
  COHORT_CHECK_ARG(options_.keep >= 0, "CheckpointManager: keep is ", options_.keep,
                   ", expected >= 0 (0 keeps all)");
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  COHORT_CHECK_IO(!ec, "cannot create checkpoint directory ", options_.dir, ": ", ec.message());
}

CheckpointManager::~CheckpointManager() {
  try {
    wait();
  } catch (const std::exception& e) {
    log::error("ckpt",
               "background checkpoint save failed (no later wait() to report it): ", e.what());
  }
}

void CheckpointManager::save(const CheckpointData& data) {
  COHORT_CHECK_ARG(data.step >= 0, "checkpoint step is ", data.step, ", expected >= 0");
  check_names("model", data.model);
  check_names("optimizer", data.optimizer);
  check_extra_names(data.extra);
  wait();  // one save in flight at most; its error surfaces here
  Snapshot s;
  s.step = data.step;
  try {
    s.state_text = data.state.dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(detail::str("checkpoint state cannot be written as JSON: ", e.what()));
  }
  if (!options_.async) {
    s.model = on_host(data.model);  // handles only: the write happens before save() returns
    s.optimizer = on_host(data.optimizer);
    for (const auto& [name, tensors] : data.extra) s.extra[name] = on_host(tensors);
    write_now(s.step, s.model, s.optimizer, s.extra, s.state_text);
    return;
  }
  s.model = copy_tensors(data.model);
  s.optimizer = copy_tensors(data.optimizer);
  for (const auto& [name, tensors] : data.extra) s.extra[name] = copy_tensors(tensors);
  worker_ = std::thread([this, s = std::move(s)]() {
    try {
      write_now(s.step, s.model, s.optimizer, s.extra, s.state_text);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void CheckpointManager::wait() {
  if (worker_.joinable()) worker_.join();
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void CheckpointManager::write_now(int64_t step, const NamedTensors& model,
                                  const NamedTensors& optimizer,
                                  const std::map<std::string, NamedTensors>& extra,
                                  const std::string& state_text) const {
  const fs::path root(options_.dir);
  std::error_code ec;
  fs::create_directories(root, ec);  // it may have been removed since the constructor
  COHORT_CHECK_IO(!ec, "cannot create checkpoint directory ", root.string(), ": ", ec.message());
  const std::string name = step_dir_name(step);
  const fs::path tmp = root / (kTmpPrefix + name + "-" + std::to_string(::getpid()));
  remove_dir(tmp);  // a failed earlier attempt of this process at the same step
  fs::create_directory(tmp, ec);
  COHORT_CHECK_IO(!ec, "cannot create ", tmp.string(), ": ", ec.message());
  const std::map<std::string, std::string> meta{{"step", std::to_string(step)}};
  write_safetensors((tmp / kModelFile).string(), model, meta);
  internal::fsync_path((tmp / kModelFile).string());
  write_safetensors((tmp / kOptimizerFile).string(), optimizer, meta);
  internal::fsync_path((tmp / kOptimizerFile).string());
  internal::write_text_file((tmp / kStateFile).string(), state_text);
  internal::fsync_path((tmp / kStateFile).string());
  std::vector<std::string> names{kModelFile, kOptimizerFile, kStateFile};
  for (const auto& [stem, tensors] : extra) {
    names.push_back(stem + kTensorFileSuffix);
    write_safetensors((tmp / names.back()).string(), tensors, meta);
    internal::fsync_path((tmp / names.back()).string());
  }
  write_manifest(tmp, step, names);
  internal::fsync_path(tmp.string());
  const fs::path final_dir = root / name;
  remove_dir(final_dir);  // re-save of the same step after a restart
  fs::rename(tmp, final_dir, ec);
  COHORT_CHECK_IO(!ec, "cannot rename ", tmp.string(), " to ", final_dir.string(), ": ",
                  ec.message());
  internal::fsync_path(root.string());
  apply_retention(step);
}

// Retention deletes only what `keep` asks for: complete checkpoints older than the one just
// saved, beyond the newest `keep` up to it. A checkpoint numbered above the saved step (not
// this manager's to judge: another run's, or one a resume left) is neither deleted nor
// counted, so it can never push out the checkpoint that was just written.
void CheckpointManager::apply_retention(int64_t saved_step) const {
  // Failures here do not fail the save (it is already durable); they are logged.
  std::vector<std::string> upto;
  for (const StepDir& d : scan_step_dirs(options_.dir)) {
    std::error_code ec;
    if (d.step <= saved_step && fs::is_regular_file(fs::path(d.path) / kManifest, ec))
      upto.push_back(d.path);
  }
  if (options_.keep > 0 && upto.size() > size_t(options_.keep)) {
    for (size_t i = 0; i + size_t(options_.keep) < upto.size(); ++i) {
      std::error_code ec;
      fs::remove_all(upto[i], ec);
      if (ec) log::warn("ckpt", "retention: cannot remove ", upto[i], ": ", ec.message());
    }
  }
  std::vector<fs::path> stale;  // collected first: no removal while iterating the directory
  std::error_code ec;
  for (const auto& ent : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = ent.path().filename().string();
    if (name.rfind(kTmpPrefix, 0) != 0) continue;
    const long pid = tmp_dir_pid(name);
    if (pid != long(::getpid()) && !pid_alive(pid)) stale.push_back(ent.path());
  }
  for (const fs::path& p : stale) {
    fs::remove_all(p, ec);
    if (ec) log::warn("ckpt", "cannot remove stale ", p.string(), ": ", ec.message());
  }
}

std::vector<std::string> CheckpointManager::list() const {
  std::vector<std::string> out;
  for (const StepDir& d : scan_step_dirs(options_.dir)) {
    std::error_code ec;
    if (fs::is_regular_file(fs::path(d.path) / kManifest, ec)) out.push_back(d.path);
  }
  return out;
}

}  // namespace cohort::ckpt
