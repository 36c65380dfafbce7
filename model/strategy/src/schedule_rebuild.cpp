#include "reshard/model/schedule_rebuild.hpp"

#include "reshard/model/errors.hpp"

namespace reshard::model {

RebuiltSchedule rebuild_or_read(const std::string& path, const ScheduleFileHeader& header, const PlannedScenario& planned) {
  RebuiltSchedule read{{}, header.bytes_read, header.file_bytes, false, ""};
  if (header.digest == 0) {
    read.why_whole = "a version 1 file carries no digest";
  } else {
    try {
      Schedule rebuilt = planned.schedule_for(header.params, header.budget);
      rebuilt.scenario = header.scenario;
      rebuilt.scenario_file = header.scenario_file;
      if (binary_digest(rebuilt) == header.digest) {
        read.schedule = std::move(rebuilt);
        read.rebuilt = true;
        return read;
      }
      read.why_whole = "the scenario and strategy give another schedule than the file's";
    } catch (const Error& e) {
      read.why_whole = std::string("the strategy does not build on this scenario (") + e.what() + ")";
    }
  }
  read.schedule = read_schedule_file(path);
  read.bytes_read = read.file_bytes;
  return read;
}

}  // namespace reshard::model
