#include "warnings.hpp"

#include <iostream>
#include <set>
#include <string>
#include <vector>

namespace reshard::cli {

namespace {
void print_once(const std::vector<std::string>& warnings) {
  static std::set<std::string> printed;
  for (const auto& w : warnings)
    if (printed.insert(w).second) std::cerr << "reshard: warning: " << w << '\n';
}
}  // namespace

void print_warnings(const model::Topology& topology) { print_once(topology.warnings()); }
void print_warnings(const model::Inventory& inventory) { print_once(inventory.config().warnings); }
void print_warnings(const model::LoadedScenario& scenario) {
  print_warnings(scenario.topology);
  print_warnings(scenario.inventory);
}

}  // namespace reshard::cli
