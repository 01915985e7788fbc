// kjv_path(): the default text corpus, extracted once from Debian's bible-kjv into a cache.
#include <fcntl.h>
#include <unistd.h>

#include <sys/wait.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "cohort/core/logging.h"
#include "cohort/data/text.h"

namespace cohort::data {
namespace {

namespace fs = std::filesystem;

// The full text is 4.3 MB; anything much smaller is an error message, not the Bible.
constexpr uintmax_t kKjvMinBytes = 1'000'000;
constexpr const char* kKjvRange = "Genesis 1:1-Revelation 22:21";

// The XDG base directory rule; the one place the data layer reads the environment.
fs::path default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return fs::path(xdg) / "cohort";
  }
  const char* home = std::getenv("HOME");
  COHORT_CHECK_IO(home != nullptr && *home != '\0',
                  "kjv_path: neither XDG_CACHE_HOME nor HOME is set; pass KjvOptions::cache_dir");
  return fs::path(home) / ".cache" / "cohort";
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs the program with its output into the already open file `out`; returns "" or an error.
std::string run_into(const std::string& program, FILE* out) {
  std::string cmd = shell_quote(program) + " " + shell_quote(kKjvRange) + " </dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return detail::str("popen failed: ", std::strerror(errno));
  char buf[1 << 16];
  size_t n;
  bool write_ok = true;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) {
    write_ok = write_ok && std::fwrite(buf, 1, n, out) == n;
  }
  int status = pclose(pipe);
  if (!write_ok) return "writing the cache file failed";
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return detail::str("`", cmd, "` failed (status ", status, ")");
  }
  if (std::fflush(out) != 0 || fsync(fileno(out)) != 0) return "flushing the cache file failed";
  return "";
}

void create_cache(const std::string& program, const fs::path& target) {
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  COHORT_CHECK_IO(!ec, "kjv_path: cannot create ", target.parent_path().string(), ": ",
                  ec.message());
  // A temporary per caller, renamed into place: concurrent ranks each write a full copy and
  // the last rename wins; no reader ever sees a partial file.
  std::string tmp = target.string() + ".tmp.XXXXXX";
  int fd = mkstemp(tmp.data());
  COHORT_CHECK_IO(fd >= 0, "kjv_path: cannot create a temporary file in ",
                  target.parent_path().string(), ": ", std::strerror(errno));
  FILE* out = fdopen(fd, "wb");
  std::string error = out ? run_into(program, out) : "fdopen failed";
  if (out)
    std::fclose(out);
  else
    close(fd);
  uintmax_t size = fs::file_size(tmp, ec);
  if (error.empty() && (ec || size < kKjvMinBytes)) {
    error = detail::str("it printed ", ec ? 0 : size, " bytes, expected at least ", kKjvMinBytes);
  }
  if (error.empty() && std::rename(tmp.c_str(), target.c_str()) != 0) {
    error = detail::str("rename to ", target.string(), " failed: ", std::strerror(errno));
  }
  if (!error.empty()) {
    fs::remove(tmp, ec);
    throw IoError(detail::str("kjv_path: extracting the King James Bible with ", program, " into ",
                              target.string(), " failed: ", error));
  }
  log::info("data", "kjv_path: wrote ", size, " bytes to ", target.string());
}

}  // namespace

std::string kjv_path(const KjvOptions& options) {
  fs::path dir = options.cache_dir.empty() ? default_cache_dir() : fs::path(options.cache_dir);
  fs::path target = dir / "kjv.txt";
  std::error_code ec;
  if (fs::is_regular_file(target, ec)) {
    uintmax_t size = fs::file_size(target, ec);
    if (!ec && size >= kKjvMinBytes) return target.string();
  }
  COHORT_CHECK_IO(access(options.program.c_str(), X_OK) == 0, "kjv_path: ", options.program,
                  " is missing (", std::strerror(errno),
                  "); install the Debian package bible-kjv (apt-get install bible-kjv), or "
                  "give a text file path instead of the default corpus");
  create_cache(options.program, target);
  return target.string();
}

}  // namespace cohort::data
