#include "warnings.hpp"

#include <iostream>
#include <set>
#include <string>

namespace reshard::cli {

void print_warnings(const model::Topology& topology) {
  static std::set<std::string> printed;
  for (const auto& w : topology.warnings())
    if (printed.insert(w).second) std::cerr << "reshard: warning: " << w << '\n';
}

}  // namespace reshard::cli
