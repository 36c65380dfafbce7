// Output of `reshard simulate`, shared by its modes (raw traffic, and schedules converted to flows):
// the readable report (makespan, critical path, busiest links) and the --json object.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <vector>

#include <nlohmann/json.hpp>

#include "reshard/model/planner.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/sim/flow_sim.hpp"
#include "reshard/sim/schedule_sim.hpp"

namespace reshard::cli {

// Schema reshard-simulate-flows-1 (docs/json-schema.md): simulated_s, transfers, flows, events, wall times.
nlohmann::json simulation_json(const sim::FlowSimResult& result, std::size_t transfers, std::size_t flows);

// Summary fields, the critical path (at most `path_rows` steps) and the `top_links` busiest links.
void print_simulation_report(std::ostream& out, const sim::FlowNetwork& network, const std::vector<sim::FlowSpec>& flows,
                             const sim::FlowSimResult& result, std::size_t transfers, std::size_t path_rows = 12,
                             std::size_t top_links = 10);

// The `n` busiest links as a table (capacity, bytes, busy time, utilization).
void print_busiest_links(std::ostream& out, const sim::FlowNetwork& network, const sim::FlowSimResult& result,
                         std::size_t n);

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
};

// Schema reshard-simulate-1 (docs/json-schema.md): the scenario and strategy, simulated_s (=
// convert_source_s + ops_makespan_s + overheads_s + convert_destination_s), estimate_s, the lower bound and its cut, counts and wall times.
nlohmann::json schedule_simulation_json(const model::Schedule& schedule, const sim::ScheduleSimulation& sim,
                                        const ScheduleReference& ref);

// "1.21 GB on GPU 17, the most of any GPU (its budget 3.20 GB)": a schedule's peak staging memory
// per GPU (model/memory.hpp) and that GPU's budget (0: unbounded), for the readable reports.
std::string staging_text(model::Bytes peak, model::GpuId gpu, model::Bytes budget);

// Makespan, estimate and lower bound, the critical path by op, the busiest links.
void print_schedule_report(std::ostream& out, const model::Schedule& schedule, const sim::ScheduleSimulation& sim,
                           const ScheduleReference& ref, std::size_t path_rows = 12, std::size_t top_links = 10);

}  // namespace reshard::cli
