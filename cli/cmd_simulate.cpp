// `reshard simulate --topology T --flows F.csv`: replays raw GPU-to-GPU traffic through the flow
// simulator (DESIGN.md §9). The conversion to flows is sim::traffic_flows; the output helpers
// (report, --json, --trace, --dump-flows) take flows + result, so other modes reuse them.
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/topology.hpp"
#include "reshard/sim/flow_io.hpp"
#include "reshard/sim/flow_sim.hpp"
#include "reshard/sim/trace.hpp"
#include "reshard/sim/traffic.hpp"
#include "simulate_report.hpp"

namespace reshard::cli {

namespace {

struct SimulateOptions {
  std::string topology;
  std::string flows;
  std::string trace;
  std::string dump_flows;
  bool json = false;
};

void run_traffic(const SimulateOptions& o) {
  if (o.topology.empty() || o.flows.empty())
    throw model::ConfigError("", 0, "--flows", "raw traffic replay needs both --topology T and --flows F.csv");
  const auto topology = model::Topology::load(o.topology);
  const auto transfers = sim::read_transfers_csv(o.flows);
  const auto traffic = sim::traffic_flows(topology, transfers, o.flows);
  sim::SimOptions options;
  if (!o.trace.empty()) options.link_group = traffic.link_group;
  const auto result = sim::simulate(traffic.network, traffic.flows, options);
  if (!o.dump_flows.empty()) sim::write_flow_dump(o.dump_flows, traffic.network, traffic.flows, result);
  if (!o.trace.empty())
    sim::write_chrome_trace(o.trace, traffic.network, traffic.flows, result,
                            sim::traffic_trace_layout(topology, transfers, traffic));
  if (o.json) {
    std::cout << simulation_json(result, transfers.size(), traffic.flows.size()).dump(2) << '\n';
    return;
  }
  std::cout << "topology: " << topology.name() << " (" << topology.gpu_count() << " GPUs), flows from " << o.flows
            << "\n\n";
  print_simulation_report(std::cout, traffic.network, traffic.flows, result, transfers.size());
  if (!o.dump_flows.empty()) std::cout << "\nflows written to " << o.dump_flows << '\n';
  if (!o.trace.empty()) std::cout << "trace written to " << o.trace << " (open in https://ui.perfetto.dev)\n";
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate", "Flow-level discrete-event simulation (max-min fair sharing)");
  auto o = std::make_shared<SimulateOptions>();
  cmd->add_option("--topology", o->topology, "Topology YAML (raw traffic replay)");
  cmd->add_option("--flows", o->flows, "Traffic CSV: id,src,dst,bytes[,after] with GPU indices; after = ids joined by ';'");
  cmd->add_option("--trace", o->trace, "Write a Chrome trace (Perfetto) to this file");
  cmd->add_option("--dump-flows", o->dump_flows, "Write every simulated flow with its times as JSON to this file");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o] { run_traffic(*o); });
}

}  // namespace reshard::cli
