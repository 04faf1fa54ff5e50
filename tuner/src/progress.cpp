// Progress reporting for terminals and logs.
#include "progress.h"

#include <unistd.h>

#include <ctime>

#include "util.h"

namespace fusetune {

Progress::Progress(const std::string& log_path) : tty_(::isatty(2)) {
  make_dirs(dir_name(log_path));
  log_ = std::fopen(log_path.c_str(), "a");
}

Progress::~Progress() {
  if (tty_ && groups_ > 0) std::fprintf(stderr, "\n");
  if (log_) std::fclose(log_);
}

void Progress::log(const std::string& line) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&now));
  if (log_) {
    std::fprintf(log_, "%s %s\n", stamp, line.c_str());
    std::fflush(log_);
  }
  if (tty_) std::fprintf(stderr, "\r\033[K%s\n", line.c_str());
  else std::fprintf(stderr, "[%s] %s\n", stamp, line.c_str());
  redraw();
}

void Progress::start_group(int index, int count, const std::string& label, int candidates) {
  group_ = index;
  groups_ = count;
  label_ = label;
  candidates_ = candidates;
  compiled_ = checked_ = timed_ = 0;
  best_ms_ = -1;
  measuring_ = false;
  group_start_ = std::chrono::steady_clock::now();
  redraw();
}

void Progress::finish_group() {
  if (tty_) std::fprintf(stderr, "\r\033[K");
}

void Progress::redraw() {
  if (!tty_ || groups_ == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (checked_ > 0 && !measuring_) {
    measuring_ = true;
    measure_start_ = now;
  }
  std::string eta = "--";
  if (checked_ > 1) {
    const double per = std::chrono::duration<double>(now - measure_start_).count() / (checked_ - 1);
    const int left = (int)(per * std::max(0, candidates_ - checked_));
    eta = std::to_string(left / 60) + "m" + std::to_string(left % 60) + "s";
  }
  std::fprintf(stderr, "\r\033[K[group %d/%d %s] compiled %d/%d  checked %d  timed %d  best %s  ETA %s", group_ + 1,
               groups_, label_.c_str(), compiled_, candidates_, checked_, timed_,
               best_ms_ > 0 ? (format_float(best_ms_) + " ms").c_str() : "--", eta.c_str());
  std::fflush(stderr);
}

}  // namespace fusetune
