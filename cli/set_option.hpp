// `--set KEY=VALUE` (repeatable) on the commands that read a scenario: compare, plan, simulate,
// exec, sweep (model/overrides.hpp).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "reshard/model/overrides.hpp"

namespace reshard::cli {

inline void add_set_option(CLI::App* cmd, std::vector<std::string>& sets) {
  cmd->add_option("--set", sets,
                  "Change the scenario or a file it names, validated like the file: destination.tp=16, "
                  "topology.cluster.nic_speed=800Gbps, model=models/kimi-k2.yaml; repeatable")
      ->allow_extra_args(false);
}

}  // namespace reshard::cli
