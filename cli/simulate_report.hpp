// Output of `reshard simulate`, shared by its modes (raw traffic, and schedules converted to flows):
// the readable report (makespan, critical path, busiest links); the --json objects are
// sim/simulate_json.hpp's.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <vector>

#include "reshard/model/planner.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/sim/flow_sim.hpp"
#include "reshard/sim/schedule_sim.hpp"
#include "reshard/sim/simulate_json.hpp"

namespace reshard::cli {

// Summary fields, the critical path (at most `path_rows` steps) and the `top_links` busiest links.
void print_simulation_report(std::ostream& out, const sim::FlowNetwork& network, const std::vector<sim::FlowSpec>& flows,
                             const sim::FlowSimResult& result, std::size_t transfers, std::size_t path_rows = 12,
                             std::size_t top_links = 10);

// The `n` busiest links as a table (capacity, bytes, busy time, utilization).
void print_busiest_links(std::ostream& out, const sim::FlowNetwork& network, const sim::FlowSimResult& result,
                         std::size_t n);

// "1.21 GB on GPU 17, the most of any GPU (its budget 3.20 GB)": a schedule's peak staging memory
// per GPU (model/memory.hpp) and that GPU's budget (0: unbounded), for the readable reports.
std::string staging_text(model::Bytes peak, model::GpuId gpu, model::Bytes budget);

// Makespan, estimate and lower bound, the critical path by op, the busiest links.
void print_schedule_report(std::ostream& out, const model::Schedule& schedule, const sim::ScheduleSimulation& sim,
                           const sim::ScheduleReference& ref, std::size_t path_rows = 12, std::size_t top_links = 10);

}  // namespace reshard::cli
