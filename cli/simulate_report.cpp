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

}  // namespace

nlohmann::json simulation_json(const sim::FlowSimResult& result, std::size_t transfers, std::size_t flows) {
  return {{"makespan_s", result.makespan.value},
          {"transfers", transfers},
          {"flows", flows},
          {"events", result.events},
          {"wall_s", result.wall.value}};
}

void print_simulation_report(std::ostream& out, const sim::FlowNetwork& network, const std::vector<sim::FlowSpec>& flows,
                             const sim::FlowSimResult& result, std::size_t transfers, std::size_t path_rows,
                             std::size_t top_links) {
  model::Bytes total;
  for (const auto& f : flows) total += f.bytes;
  print_fields(out, {{"makespan", model::format(result.makespan)},
                     {"transfers", std::to_string(transfers)},
                     {"flows", std::to_string(flows.size()) + " (ECMP sub-flows counted)"},
                     {"bytes", model::format(total)},
                     {"events", std::to_string(result.events)},
                     {"rate updates", std::to_string(result.rate_updates)},
                     {"simulation wall time", model::format(result.wall)}});

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
  Table links({"link", "capacity>", "bytes>", "busy>", "utilization>"});
  for (auto l : sim::busiest_links(result, top_links)) {
    const auto& s = result.links[l];
    links.add({network.link_name(l), model::format(network.capacity[l]), model::format(s.bytes), model::format(s.busy),
               percent(s.utilization)});
  }
  links.print(out);
}

}  // namespace reshard::cli
