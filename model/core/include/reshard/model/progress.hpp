// Progress of a long computation, as data: library code reports it through an optional callback
// and never prints; the command line draws it (cli/progress.hpp).
//
// A computation goes through stages ("estimate", "tune", "simulate", ...); within a stage, `done`
// of `total` units are finished (total 0: not known in advance). `item` names what just finished
// ("domain_chain: 1.23 s"), empty when nothing worth naming did.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace reshard::model {

struct ProgressStep {
  std::string stage;
  std::int64_t done = 0;
  std::int64_t total = 0;
  std::string item;
};

using ProgressFn = std::function<void(const ProgressStep&)>;

}  // namespace reshard::model
