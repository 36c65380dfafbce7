#include "simulate_report.hpp"

#include <cstdio>
#include <ostream>
#include <string>

#include "reshard/sim/flow_sim.hpp"
#include "table.hpp"

namespace reshard::cli {

namespace {

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", 100.0 * x);
  return buf;
}

// The engine that computed the rates (sim::RateSolver; --rate-solver).
std::string engine_text(sim::RateSolver solver) {
  return std::string(sim::to_string(solver)) +
         (solver == sim::RateSolver::Groups ? " (one rate per bottleneck link)" : " (one rate per class of flows)");
}

}  // namespace

void print_simulation_report(std::ostream& out, const sim::FlowNetwork& network, const std::vector<sim::FlowSpec>& flows,
                             const sim::FlowSimResult& result, std::size_t transfers, std::size_t path_rows,
                             std::size_t top_links) {
  model::ByteAmount total;
  for (const auto& f : flows) total += f.bytes;
  print_fields(out, {{"makespan", model::format(result.makespan)},
                     {"transfers", std::to_string(transfers)},
                     {"flows", std::to_string(flows.size()) + " (ECMP sub-flows counted)"},
                     {"bytes", model::format(total)},
                     {"events", std::to_string(result.events)},
                     {"rate updates", std::to_string(result.rate_updates) + " (" + std::to_string(result.rate_changes) +
                                          " rates changed)"},
                     {"simulated flows", std::to_string(result.simulated_flows) + " (one per class of alike flows)"},
                     {"rate engine", engine_text(result.solver)},
                     {"simulation wall time", model::format(result.wall) + " (finding the classes " +
                                                  model::format(result.classes_wall) + ", event loop " +
                                                  model::format(result.event_loop_wall) + ")"}});

  out << "\ncritical path (last finish first):\n";
  Table path({"flow", "release>", "start>", "finish>", "bytes>", "bottleneck"});
  const std::size_t shown = std::min(path_rows, result.critical_path.size());
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& s = result.critical_path[i];
    const auto& f = flows[s.flow_index];
    path.add({f.label.empty() ? "flow " + std::to_string(f.id) : f.label, model::format(s.release),
              model::format(s.start), model::format(s.finish), model::format(f.bytes),
              s.bottleneck >= 0 ? network.link_name(s.bottleneck) : "(latency only)"});
  }
  path.print(out);
  if (shown < result.critical_path.size())
    out << "  ... " << result.critical_path.size() - shown << " more steps\n";

  out << "\nbusiest links:\n";
  print_busiest_links(out, network, result, top_links);
}

void print_busiest_links(std::ostream& out, const sim::FlowNetwork& network, const sim::FlowSimResult& result,
                         std::size_t n) {
  Table links({"link", "capacity>", "bytes>", "busy>", "utilization>"});
  for (auto l : sim::busiest_links(result, n)) {
    const auto& s = result.links[l];
    links.add({network.link_name(l), model::format(network.capacity[l]), model::format(s.bytes), model::format(s.busy),
               percent(s.utilization)});
  }
  links.print(out);
}

std::string staging_text(model::Bytes peak, model::GpuId gpu, model::Bytes budget) {
  if (gpu < 0) return "none";
  return model::format(peak) + " on GPU " + std::to_string(gpu) + ", the most of any GPU (" +
         (budget.value > 0 ? "its budget " + model::format(budget) : std::string("no budget")) + ")";
}

void print_schedule_report(std::ostream& out, const model::Schedule& schedule, const sim::ScheduleSimulation& sim,
                           const sim::ScheduleReference& ref, std::size_t path_rows, std::size_t top_links) {
  model::Bytes total;
  for (const auto& op : schedule.ops) total += op.bytes;
  const double lb = ref.lower_bound.time.value;
  const bool converts = sim.convert_source.value > 0 || sim.convert_destination.value > 0;
  // A delta refit's encode and decode ride in the conversion phases (sim/schedule_sim.hpp).
  const std::string before = ref.delta.empty() ? "convert at the source " : "encode (and convert) at the source ";
  const std::string after = ref.delta.empty() ? " + convert at the destination " : " + decode (and convert) at the destination ";
  const std::string terms = converts ? before + model::format(sim.convert_source) + " + transfers " +
                                           model::format(sim.ops_makespan) + " + overheads " +
                                           model::format(sim.overheads) + after +
                                           model::format(sim.convert_destination)
                                     : "transfers " + model::format(sim.ops_makespan) + " + overheads " +
                                           model::format(sim.overheads);
  std::vector<std::pair<std::string, std::string>> fields{
                     {"scenario", ref.scenario},
                     {"strategy", ref.strategy},
                     {"profile", ref.profile},
                     {"makespan (simulated)", model::format(sim.makespan) + " (" + terms + ")"},
                     {"estimate", model::format(ref.estimate) + " (simulated / estimate = " +
                                      fixed(ref.estimate.value > 0 ? sim.makespan.value / ref.estimate.value : 0.0, 3) + ")"},
                     {"lower bound", model::format(ref.lower_bound.time) + " (" + ref.lower_bound.binding.cut + ", " +
                                         ref.lower_bound.binding.where + "; simulated / bound = " +
                                         fixed(lb > 0 ? sim.makespan.value / lb : 0.0, 2) + ")"},
                     {"operations", std::to_string(schedule.ops.size())},
                     {"staging", staging_text(ref.staging_peak, ref.staging_gpu, ref.staging_budget)},
                     {"flows", std::to_string(sim.flow_count()) + " (ECMP sub-flows counted; " +
                                   std::to_string(sim.join_flows) + " join flows)"},
                     {"bytes", model::format(total)},
                     {"events", std::to_string(sim.events)},
                     {"rate updates", std::to_string(sim.result.rate_updates)},
                     {"simulated flows", std::to_string(sim.result.simulated_flows) + " (one per class of alike flows)"},
                     {"rate engine", engine_text(sim.result.solver)},
                     {"simulation wall time", model::format(sim.wall) + " (reading the ops " +
                                                  model::format(sim.build_wall) + ", finding the classes " +
                                                  model::format(sim.result.classes_wall) + ", event loop " +
                                                  model::format(sim.result.event_loop_wall) + ")"}};
  if (!ref.precision.empty()) fields.insert(fields.begin() + 3, {"precision", ref.precision});
  if (!ref.delta.empty()) fields.insert(fields.begin() + 3, {"delta", ref.delta});
  print_fields(out, fields);

  out << "\ncritical path by operation (last finish first):\n";
  Table path({"op", "phase", "from", "to", "bytes>", "release>", "start>", "finish>", "bottleneck"});
  // One row per op, in path order. An op's flows follow each other on the path (its last is often
  // the zero-byte flow of its step overhead): the op's bottleneck is that of its first flow that
  // has one, the link --trace names; "(latency only)" when none of its flows has one.
  std::vector<std::pair<std::int64_t, std::int32_t>> ops_on_path;  // op index, bottleneck link
  for (const auto& step : sim.result.critical_path) {
    const auto i = sim.op_of_flow[step.flow_index];
    if (i < 0) continue;
    if (ops_on_path.empty() || ops_on_path.back().first != i) ops_on_path.emplace_back(i, step.bottleneck);
    else if (ops_on_path.back().second < 0) ops_on_path.back().second = step.bottleneck;
  }
  const std::size_t steps = ops_on_path.size(), shown = std::min(steps, path_rows);
  for (std::size_t k = 0; k < shown; ++k) {
    const auto [i, bottleneck] = ops_on_path[k];
    const auto& op = schedule.ops[static_cast<std::size_t>(i)];
    const auto& t = sim.ops[static_cast<std::size_t>(i)];
    path.add({std::to_string(op.id), model::to_string(op.phase), "gpu " + std::to_string(op.src),
              op.src == op.dst ? "(local copy)" : "gpu " + std::to_string(op.dst), model::format(op.bytes),
              model::format(t.release), model::format(t.start), model::format(t.finish),
              bottleneck >= 0 ? sim.network.link_name(bottleneck) : "(latency only)"});
  }
  path.print(out);
  if (shown < steps) out << "  ... " << steps - shown << " more operations\n";

  out << "\nbusiest links:\n";
  print_busiest_links(out, sim.network, sim.result, top_links);
}

}  // namespace reshard::cli
