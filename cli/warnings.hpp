// Warnings from loaded inputs (the library returns them as data and never prints).
#pragma once

#include "reshard/model/scenario.hpp"
#include "reshard/model/topology.hpp"

namespace reshard::cli {

// Prints each of the topology's warnings on stderr as "reshard: warning: ...", once per process
// (a warning already printed is not repeated when the same file is loaded again).
void print_warnings(const model::Topology& topology);
// The model file's (model::ModelConfig::warnings), the same way.
void print_warnings(const model::Inventory& inventory);
// A loaded scenario's: its topology's and its model's.
void print_warnings(const model::LoadedScenario& scenario);

}  // namespace reshard::cli
