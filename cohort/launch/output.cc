#include "cohort/launch/output.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace cohort::launch::detail {

void LineTail::push(std::string_view line) {
  if (capacity_ == 0) return;
  if (lines_.size() == capacity_) lines_.pop_front();
  lines_.emplace_back(line);
}

std::string LineTail::indented() const {
  if (lines_.empty()) return "  (no output)";
  std::string out;
  for (const auto& l : lines_) {
    if (!out.empty()) out += '\n';
    out += "  ";
    out += l;
  }
  return out;
}

void LineRelay::feed(std::string_view data) {
  while (!data.empty()) {
    size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(data);
      if (partial_.size() >= kMaxLine) flush();
      return;
    }
    if (partial_.empty()) {
      emit(data.substr(0, nl));
    } else {
      partial_.append(data.substr(0, nl));
      emit(partial_);
      partial_.clear();
    }
    data.remove_prefix(nl + 1);
  }
}

void LineRelay::flush() {
  if (partial_.empty()) return;
  std::string line = std::move(partial_);
  partial_.clear();
  emit(line);
}

void LineRelay::emit(std::string_view line) {
  if (tail_) tail_->push(line);
  // One write per line: lines of different ranks never interleave mid-line.
  std::string out;
  out.reserve(prefix_.size() + line.size() + 1);
  out.append(prefix_).append(line).push_back('\n');
  write_all(out_fd_, out);
}

bool write_all(int fd, std::string_view data) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!data.empty()) {
    ssize_t w = ::write(fd, data.data(), data.size());
    if (w > 0) {
      data.remove_prefix(static_cast<size_t>(w));
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN && Clock::now() < deadline) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    return false;
  }
  return true;
}

}  // namespace cohort::launch::detail
