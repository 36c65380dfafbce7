// Runs a burst of flows through SimGrid 3.32 (network model CM02, TCP-gamma 0, crosstraffic 0,
// weight-S 0, zero link latency) and returns every flow's finish time: the independent max-min
// solver the simulator is checked against (tests/simgrid_crosscheck.cpp, bench/bench_sim.cpp).
//
// Platform: one link per FlowNetwork link with bandwidth = capacity; per flow, a full-routing zone
// holding one host pair whose only route is exactly the flow's links (so the pair is used by that
// flow alone); all zones under an empty root zone. One actor starts every flow as a comm at t = 0
// and waits for all of them. SimGrid's engine can be created once per process, so each run happens
// in a forked child and the times come back through a pipe.
#pragma once

#include <vector>

#include "reshard/sim/flow_sim.hpp"

namespace reshard::simgrid_check {

struct SimgridRun {
  std::vector<double> finish;  // seconds, input order
  double wall_s = 0;           // wall time of the SimGrid simulation itself (platform building excluded)
  double setup_s = 0;          // wall time of building the platform
};

// Flows must be a burst: no `after`, zero latency. Throws std::runtime_error when the child fails.
SimgridRun run_simgrid(const sim::FlowNetwork& network, const std::vector<sim::FlowSpec>& flows);

}  // namespace reshard::simgrid_check
