#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "reshard/exec/backend.hpp"
#include "table.hpp"

namespace reshard::cli {

void add_backends_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("backends", "List the execution backends compiled into this build");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->callback([json] {
    const auto& list = exec::backends();
    if (*json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& b : list) j.push_back({{"name", b.name}, {"available", b.available}, {"detail", b.detail}});
      std::cout << nlohmann::json{{"schema", "reshard-backends-1"}, {"backends", j}, {"nccl_library", exec::nccl_library()}}.dump(2)
                << '\n';
      return;
    }
    Table t({"backend", "available", "detail"});
    for (const auto& b : list) t.add({b.name, b.available ? "yes" : "no", b.detail});
    t.print(std::cout);
    std::cout << "nccl library: " << exec::nccl_library() << '\n';
  });
}

}  // namespace reshard::cli
