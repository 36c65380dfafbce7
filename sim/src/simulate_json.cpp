#include "reshard/sim/simulate_json.hpp"

namespace reshard::sim {

nlohmann::json simulation_json(const FlowSimResult& result, std::size_t transfers, std::size_t flows) {
  return {{"schema", "reshard-simulate-flows-1"},
          {"simulated_s", result.makespan.value},
          {"transfers", transfers},
          {"flows", flows},
          {"events", result.events},
          {"rate_updates", result.rate_updates},
          {"rate_changes", result.rate_changes},
          {"rate_solver", to_string(result.solver)},
          {"simulated_flows", result.simulated_flows},
          {"wall_s", result.wall.value},
          {"wall_classes_s", result.classes_wall.value},
          {"wall_event_loop_s", result.event_loop_wall.value}};
}

nlohmann::json schedule_simulation_json(const model::Schedule& schedule, const ScheduleSimulation& sim,
                                        const ScheduleReference& ref) {
  const double lb = ref.lower_bound.time.value;
  nlohmann::json j{{"schema", "reshard-simulate-1"},
                   {"scenario", ref.scenario},
                   {"strategy", model::to_string(schedule.params.strategy)},
                   {"params", model::describe(schedule.params)},
                   {"profile", ref.profile},
                   {"simulated_s", sim.makespan.value},
                   {"ops_makespan_s", sim.ops_makespan.value},
                   {"overheads_s", sim.overheads.value},
                   {"convert_source_s", sim.convert_source.value},
                   {"convert_destination_s", sim.convert_destination.value},
                   {"estimate_s", ref.estimate.value},
                   {"lower_bound_s", lb},
                   {"bound_cut", ref.lower_bound.binding.cut},
                   {"bound_where", ref.lower_bound.binding.where},
                   {"operations", schedule.ops.size()},
                   {"peak_staging_bytes", ref.staging_peak.value},
                   {"peak_staging_gpu", ref.staging_gpu},
                   {"flows", sim.flow_count()},
                   {"events", sim.events},
                   {"rate_updates", sim.result.rate_updates},
                   {"rate_solver", to_string(sim.result.solver)},
                   {"simulated_flows", sim.result.simulated_flows},
                   {"wall_s", sim.wall.value},
                   {"wall_build_s", sim.build_wall.value},
                   {"wall_classes_s", sim.result.classes_wall.value},
                   {"wall_event_loop_s", sim.result.event_loop_wall.value}};
  if (!ref.schedule_file.empty()) j["schedule_file"] = ref.schedule_file;
  return j;
}

}  // namespace reshard::sim
