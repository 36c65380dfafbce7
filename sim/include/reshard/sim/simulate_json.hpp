// The JSON of a simulation, as `reshard simulate --json` prints it and reshard.simulate() returns
// it (docs/json-schema.md): one function per schema, shared by the CLI and the Python module.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "reshard/model/planner.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/sim/flow_sim.hpp"
#include "reshard/sim/schedule_sim.hpp"

namespace reshard::sim {

// Schema reshard-simulate-flows-1: simulated_s, transfers, flows, events, wall times.
nlohmann::json simulation_json(const FlowSimResult& result, std::size_t transfers, std::size_t flows);

// What a simulated schedule is compared against (absent values are left out).
struct ScheduleReference {
  std::string scenario;
  std::string strategy;  // strategy and parameters, e.g. "domain_chain chunk=512KiB max_chain=8"
  std::string schedule_file;  // where the schedule was read from; empty: built here
  std::string profile;
  model::Seconds estimate;     // model::estimate(...).time
  model::Bytes staging_peak;   // model::estimate(...).staging_peak and staging_gpu (model/memory.hpp)
  model::GpuId staging_gpu = -1;
  model::Bytes staging_budget;  // that GPU's staging budget (Schedule::budget; 0: unbounded)
  model::LowerBound lower_bound;
  std::string precision;  // precision_line of a scenario with a precision change; empty otherwise
  std::string delta;      // DeltaSpec::describe() of a delta refit (model/delta.hpp); empty otherwise
};

// Schema reshard-simulate-1: the scenario and strategy, simulated_s (= convert_source_s +
// ops_makespan_s + overheads_s + convert_destination_s), estimate_s, the lower bound and its cut,
// the peak staging, counts and wall times.
nlohmann::json schedule_simulation_json(const model::Schedule& schedule, const ScheduleSimulation& sim,
                                        const ScheduleReference& ref);

}  // namespace reshard::sim
