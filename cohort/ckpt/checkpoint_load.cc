// CheckpointManager: the load side (manifest verification, load, load_latest).
#include <filesystem>

#include "cohort/ckpt/checkpoint.h"
#include "cohort/ckpt/file_io.h"
#include "cohort/ckpt/manifest.h"
#include "cohort/core/logging.h"

namespace cohort::ckpt {
namespace fs = std::filesystem;
using namespace internal;

namespace {

nlohmann::json parse_json_file(const std::string& path, const char* what) {
  const std::string text = read_text_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw IoError(detail::str(path, ": ", what, " is not valid JSON: ", e.what()));
  }
}

// Parses MANIFEST.json and checks its shape; returns the "files" object.
nlohmann::json read_manifest(const fs::path& dir, int64_t* step) {
  const std::string path = (dir / kManifest).string();
  std::error_code ec;
  COHORT_CHECK_IO(fs::is_regular_file(path, ec), path,
                  ": missing manifest (the checkpoint was never completed)");
  const nlohmann::json m = parse_json_file(path, "manifest");
  COHORT_CHECK_IO(m.is_object() && m.value("format", "") == kFormat, path,
                  ": not a cohort checkpoint manifest (expected \"format\": \"", kFormat, "\")");
  COHORT_CHECK_IO(m.contains("version") && m["version"].is_number_integer() &&
                      m["version"].get<int>() == kFormatVersion,
                  path, ": manifest version ", m.value("version", nlohmann::json()).dump(),
                  ", expected ", kFormatVersion);
  COHORT_CHECK_IO(m.contains("step") && m["step"].is_number_integer(), path,
                  ": manifest has no integer \"step\"");
  *step = m["step"].get<int64_t>();
  if (auto from_name = parse_step_dir(dir.filename().string()))
    COHORT_CHECK_IO(*from_name == *step, path, ": manifest says step ", *step,
                    " but the directory is ", dir.filename().string());
  COHORT_CHECK_IO(m.contains("files") && m["files"].is_object(), path,
                  ": manifest has no \"files\" object");
  const nlohmann::json& files = m["files"];
  for (const char* name : {kModelFile, kOptimizerFile, kStateFile})
    COHORT_CHECK_IO(files.contains(name), path, ": manifest does not list ", name);
  return files;
}

// Every listed file must exist with the listed size and SHA-256.
void verify_files(const fs::path& dir, const nlohmann::json& files) {
  const std::string mpath = (dir / kManifest).string();
  for (const auto& [name, info] : files.items()) {
    COHORT_CHECK_IO(
        !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..", mpath,
        ": file name '", name, "' is not a plain file name");
    COHORT_CHECK_IO(info.is_object() && info.contains("size") &&
                        info["size"].is_number_unsigned() && info.contains("sha256") &&
                        info["sha256"].is_string(),
                    mpath, ": entry for ", name, " needs \"size\" and \"sha256\"");
    const std::string path = (dir / name).string();
    std::error_code ec;
    COHORT_CHECK_IO(fs::is_regular_file(path, ec), "missing file ", path,
                    " (listed in the manifest)");
    const uint64_t want_size = info["size"].get<uint64_t>();
    const uint64_t have_size = fs::file_size(path, ec);
    COHORT_CHECK_IO(!ec && have_size == want_size, "size mismatch in ", path, ": ", have_size,
                    " bytes, manifest says ", want_size);
    uint64_t hashed = 0;
    const std::string have = sha256_file(path, &hashed);
    const std::string want = info["sha256"].get<std::string>();
    COHORT_CHECK_IO(have == want, "checksum mismatch in ", path, ": SHA-256 ", have,
                    ", manifest says ", want);
  }
}

// A tensor file in the directory that the manifest does not list (a shard from another world
// copied in, a file left by hand) would be silently ignored by the reader while the user
// believes it is part of the checkpoint: refused, naming it.
void refuse_unlisted_tensor_files(const fs::path& dir, const nlohmann::json& files) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(kTensorFileSuffix) || files.contains(name)) continue;
    throw IoError(detail::str(e.path().string(), ": a tensor file that ", kManifest,
                              " does not list: it is not part of this checkpoint (move it out of ",
                              dir.string(), ")"));
  }
}

}  // namespace

CheckpointData CheckpointManager::load(const std::string& step_dir) {
  const fs::path dir(step_dir);
  std::error_code ec;
  COHORT_CHECK_IO(fs::is_directory(dir, ec), "checkpoint ", step_dir,
                  ": no such directory (expected a step-<N> directory written by cohort train)");
  CheckpointData out;
  const nlohmann::json files = read_manifest(dir, &out.step);
  verify_files(dir, files);
  refuse_unlisted_tensor_files(dir, files);
  out.model = read_safetensors((dir / kModelFile).string());
  out.optimizer = read_safetensors((dir / kOptimizerFile).string());
  out.state = parse_json_file((dir / kStateFile).string(), "trainer state");
  const std::string suffix = kTensorFileSuffix;
  for (const auto& [name, info] : files.items()) {
    if (name == kModelFile || name == kOptimizerFile || !name.ends_with(suffix)) continue;
    out.extra[name.substr(0, name.size() - suffix.size())] =
        read_safetensors((dir / name).string());
  }
  return out;
}

std::optional<CheckpointData> CheckpointManager::load_latest() const {
  const auto dirs = scan_step_dirs(options_.dir);
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    try {
      return load(it->path);
    } catch (const std::exception& e) {
      log::warn("ckpt", "skipping checkpoint ", it->path, ": ", e.what());
    }
  }
  return std::nullopt;
}

}  // namespace cohort::ckpt
