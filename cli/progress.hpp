// Progress of the long commands (plan, compare, simulate, sweep) on stderr: one line redrawn in
// place with '\r', "tune 7/40 (domain_chain max_chain=2: 1.23 s), 12.0 s, ETA 20.0 s". Drawn only
// on a terminal and never under --json, so pipes, logs and machine output stay clean. Library code
// reports through model::ProgressFn (model/progress.hpp); this draws it.
#pragma once

#include <chrono>
#include <iosfwd>
#include <mutex>
#include <string>

#include "reshard/model/progress.hpp"

namespace reshard::cli {

class ProgressLine {
 public:
  // Draws on `out` only when `enabled` (the caller checks the terminal: for_stderr()).
  ProgressLine(std::ostream& out, bool enabled);
  ~ProgressLine();  // clears the line
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // On stderr, enabled when stderr is a terminal and `json` is false.
  static ProgressLine for_stderr(bool json);

  bool enabled() const { return enabled_; }
  // Redraws the line (at most every 0.1 s, and always at a stage's first and last unit).
  // The ETA is the stage's elapsed time per unit done times the units left (total known).
  // Safe to call from several threads.
  void update(const model::ProgressStep& step);
  // A stage without counts ("plan", "build schedule"): its name and elapsed time.
  void stage(const std::string& name) { update({name, 0, 0, ""}); }
  // A callback for library code (empty when disabled, so the library skips the work of reporting).
  model::ProgressFn callback();
  // Clears the line (before printing the result on a terminal that shares stdout and stderr).
  void clear();

 private:
  using Clock = std::chrono::steady_clock;
  std::ostream& out_;
  bool enabled_;
  std::mutex mutex_;
  std::string stage_;
  Clock::time_point stage_start_, last_draw_;
  std::size_t drawn_ = 0;  // characters of the line on screen
};

}  // namespace reshard::cli
