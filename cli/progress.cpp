#include "progress.hpp"

#include <unistd.h>

#include <iostream>
#include <sstream>

#include "reshard/model/units.hpp"

namespace reshard::cli {

namespace {
constexpr std::size_t kWidth = 110;  // longer lines are cut: a wrapped line cannot be redrawn
}

ProgressLine::ProgressLine(std::ostream& out, bool enabled) : out_(out), enabled_(enabled) {}

ProgressLine::~ProgressLine() { clear(); }

ProgressLine ProgressLine::for_stderr(bool json) { return ProgressLine(std::cerr, !json && isatty(STDERR_FILENO)); }

model::ProgressFn ProgressLine::callback() {
  if (!enabled_) return {};
  return [this](const model::ProgressStep& s) { update(s); };
}

void ProgressLine::update(const model::ProgressStep& s) {
  if (!enabled_) return;
  std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  const bool new_stage = s.stage != stage_;
  if (new_stage) {
    stage_ = s.stage;
    stage_start_ = now;
  }
  const bool last = s.total > 0 && s.done >= s.total;
  if (!new_stage && !last && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - stage_start_).count();
  std::ostringstream line;
  line << s.stage;
  if (s.done > 0 || s.total > 0) line << ' ' << s.done;
  if (s.total > 0) line << '/' << s.total;
  if (!s.item.empty()) line << " (" << s.item << ")";
  line << ", " << model::format(model::Seconds{elapsed});
  if (s.total > 0 && s.done > 0 && s.done < s.total)
    line << ", ETA "
         << model::format(model::Seconds{elapsed / static_cast<double>(s.done) * static_cast<double>(s.total - s.done)});
  std::string text = line.str();
  if (text.size() > kWidth) text = text.substr(0, kWidth - 3) + "...";
  const std::size_t pad = drawn_ > text.size() ? drawn_ - text.size() : 0;
  out_ << '\r' << text << std::string(pad, ' ') << std::flush;
  drawn_ = text.size();
}

void ProgressLine::clear() {
  if (!enabled_) return;
  std::lock_guard lock(mutex_);
  if (drawn_ == 0) return;
  out_ << '\r' << std::string(drawn_, ' ') << '\r' << std::flush;
  drawn_ = 0;
  stage_.clear();
}

}  // namespace reshard::cli
