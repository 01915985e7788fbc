#include "cohort/ckpt/checkpoint_aside.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>

#include "cohort/core/error.h"

namespace cohort::ckpt {
namespace fs = std::filesystem;

namespace {

// The number a generation folder is named by, or 0 for anything else (step-* folders of the
// flat layout, stray files).
int64_t generation_number(const std::string& name) {
  int64_t n = 0;
  auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
  return ec == std::errc() && p == name.data() + name.size() && n > 0 ? n : 0;
}

}  // namespace

std::string earlier_root(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();  // "ckpt/" -> "ckpt.earlier"
  return d + ".earlier";
}

std::string claim_generation(const std::string& root) {
  std::error_code ec;
  fs::create_directories(root, ec);
  COHORT_CHECK_IO(!ec, "cannot create ", root,
                  " (where earlier checkpoints are kept): ", ec.message());
  int64_t highest = 0;
  for (const auto& e : fs::directory_iterator(root, ec))
    highest = std::max(highest, generation_number(e.path().filename().string()));
  COHORT_CHECK_IO(!ec, "cannot list ", root, ": ", ec.message());
  // Another process may claim the same number between the scan and mkdir: then try the next.
  for (int64_t n = highest + 1;; ++n) {
    const fs::path g = fs::path(root) / std::to_string(n);
    if (fs::create_directory(g, ec)) return g.string();
    COHORT_CHECK_IO(!ec, "cannot create ", g.string(), ": ", ec.message());
  }
}

std::string move_aside(const std::vector<std::string>& paths, const std::string& root) {
  if (paths.empty()) return "";
  const std::string generation = claim_generation(root);
  for (const std::string& p : paths) {
    fs::path from(p);
    if (from.filename().empty()) from = from.parent_path();  // "ckpt/server-0/"
    const fs::path to = fs::path(generation) / from.filename();
    std::error_code ec;
    fs::rename(from, to, ec);
    COHORT_CHECK_IO(!ec, "cannot move ", p, " to ", to.string(), ": ", ec.message());
  }
  return generation;
}

}  // namespace cohort::ckpt
