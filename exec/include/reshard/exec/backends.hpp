// Execution backends compiled into this build (docs/design.md §10).
#pragma once

#include <string>
#include <vector>

namespace reshard::exec {

struct BackendInfo {
  std::string name;    // "host", "cuda", "nccl"
  bool available;      // compiled in (its dependency was found at configure time)
  std::string detail;  // what it needs or what it found
};

std::vector<BackendInfo> backends();

}  // namespace reshard::exec
