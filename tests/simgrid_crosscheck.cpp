// Cross-check against SimGrid 3.32 (CM02, TCP-gamma 0, crosstraffic 0, weight-S 0, zero latency):
// random bursts with shared links; every finish time of both rate engines (the class engine and
// the group engine, sim::RateSolver) must agree with SimGrid's to 1e-6 relative.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "reshard/sim/flow_sim.hpp"
#include "simgrid_runner.hpp"
#include "simgrid_bursts.hpp"

namespace {

using namespace reshard;

double max_relative_error(const sim::FlowSimResult& ours, const std::vector<double>& theirs) {
  double worst = 0;
  for (std::size_t i = 0; i < theirs.size(); ++i)
    worst = std::max(worst, std::abs(ours.timing[i].finish.value - theirs[i]) / theirs[i]);
  return worst;
}

void check(const simgrid_check::Burst& burst) {
  const auto theirs = simgrid_check::run_simgrid(burst.network, burst.flows);
  ASSERT_EQ(theirs.finish.size(), burst.flows.size());
  for (const auto solver : {sim::RateSolver::Classes, sim::RateSolver::Groups}) {
    sim::SimOptions options;
    options.solver = solver;
    const auto ours = sim::simulate(burst.network, burst.flows, options);
    for (std::size_t i = 0; i < burst.flows.size(); ++i)
      ASSERT_NEAR(ours.timing[i].finish.value, theirs.finish[i], 1e-6 * theirs.finish[i])
          << "flow " << burst.flows[i].id << " (" << burst.flows[i].label << "), " << sim::to_string(solver);
    std::printf("  %zu flows on %zu links, %s: max relative difference %.3g, makespan %.6g s\n", burst.flows.size(),
                burst.network.capacity.size(), std::string(sim::to_string(solver)).c_str(),
                max_relative_error(ours, theirs.finish), ours.makespan.value);
  }
}

TEST(SimgridCrosscheck, SyntheticFabricSmall) { check(simgrid_check::synthetic_burst(16, 30, 1)); }
TEST(SimgridCrosscheck, SyntheticFabricMedium) { check(simgrid_check::synthetic_burst(64, 300, 2)); }
TEST(SimgridCrosscheck, SyntheticFabricLarge) { check(simgrid_check::synthetic_burst(256, 800, 3)); }
TEST(SimgridCrosscheck, DgxH100_64Nodes) {
  check(simgrid_check::topology_burst(RESHARD_SOURCE_DIR "/topologies/dgx-h100-64n.yaml", 300, 5));
}
TEST(SimgridCrosscheck, Gb200Nvl72_2Racks) {
  check(simgrid_check::topology_burst(RESHARD_SOURCE_DIR "/topologies/gb200-nvl72-2r.yaml", 300, 6));
}
TEST(SimgridCrosscheck, RandomLinkSets) {
  // Unstructured: 40 links of random capacity, 500 flows over random subsets of 1-5 links.
  check(simgrid_check::random_link_burst(40, 500, 4));
}

}  // namespace
