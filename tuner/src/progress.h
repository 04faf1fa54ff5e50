// Progress reporting: a redrawn status line on a terminal (groups, candidates compiled,
// checked and timed, best so far, ETA) and plain timestamped lines in the log file.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace fusetune {

class Progress {
 public:
  explicit Progress(const std::string& log_path);
  ~Progress();

  // A plain line: to the log, and to stderr (above the status line on a terminal).
  void log(const std::string& line);
  void start_group(int index, int count, const std::string& label, int candidates);
  void compiled() { ++compiled_; redraw(); }
  void measured(bool ok, double best_ms) {
    ++checked_;
    if (ok) ++timed_;
    best_ms_ = best_ms;
    redraw();
  }
  void finish_group();

 private:
  void redraw();
  std::FILE* log_ = nullptr;
  bool tty_ = false;
  int group_ = 0, groups_ = 0, candidates_ = 0, compiled_ = 0, checked_ = 0, timed_ = 0;
  double best_ms_ = -1;
  std::string label_;
  std::chrono::steady_clock::time_point group_start_, measure_start_;
  bool measuring_ = false;
};

}  // namespace fusetune
