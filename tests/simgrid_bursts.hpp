// Random burst workloads shared by the SimGrid cross-check and the simulator benchmark.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reshard/sim/flow_sim.hpp"

namespace reshard::simgrid_check {

struct Burst {
  sim::FlowNetwork network;
  std::vector<sim::FlowSpec> flows;
};

// A synthetic rail-less cluster: `gpus` GPUs in nodes of 8 with NVLink ports (450 GB/s per
// direction) to a node switch, one 400 Gb/s NIC each, a leaf per 32 GPUs and 4 spines with 2:1
// oversubscribed uplinks. `flows` transfers between random GPU pairs of 1 MB-1 GB; a cross-leaf
// transfer is split into 4 ECMP sub-flows (one per spine).
Burst synthetic_burst(int gpus, int flows, std::uint64_t seed);

// `transfers` random GPU pairs of 1 MB-1 GB on a shipped topology, as flows through
// sim::traffic_flows (ECMP sub-flows), with latencies set to zero (SimGrid runs a pure burst).
// With min_flows > 0, transfers are added until the flows (sub-flows included) reach min_flows.
Burst topology_burst(const std::string& topology_file, int transfers, std::uint64_t seed, int min_flows = 0);

// `links` links of random capacity (1-100 GB/s), `flows` flows over random sets of 1-5 links.
Burst random_link_burst(int links, int flows, std::uint64_t seed);

}  // namespace reshard::simgrid_check
