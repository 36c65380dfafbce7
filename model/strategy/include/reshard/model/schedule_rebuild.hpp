// A binary schedule file's schedule, rebuilt rather than read where that gives the same schedule:
// every process of a run rebuilds it from the scenario and the strategy the file's header names (a
// schedule reshard builds is the same on every process) and uses it when its digest is the
// header's, so a process reads the 128-byte header and the scenario's name, never the operations.
// Otherwise (a version 1 file, other --set values, another reshard's build, a schedule from another
// tool) the whole file is read, which the executor then validates against the scenario.
#pragma once

#include <cstdint>
#include <string>

#include "reshard/model/planned.hpp"
#include "reshard/model/schedule_file.hpp"

namespace reshard::model {

// The schedule of a binary file and what was read of the file to get it.
struct RebuiltSchedule {
  Schedule schedule;
  std::int64_t bytes_read = 0, file_bytes = 0;
  bool rebuilt = false;   // rebuilt from its scenario and strategy; the header's digest matched
  std::string why_whole;  // read whole: why the rebuilt schedule was not the file's
};

// `header`: read_schedule_header(path); `planned`: the scenario the header names, planned. Throws
// what read_schedule_file throws when the file is read whole.
RebuiltSchedule rebuild_or_read(const std::string& path, const ScheduleFileHeader& header, const PlannedScenario& planned);

}  // namespace reshard::model
