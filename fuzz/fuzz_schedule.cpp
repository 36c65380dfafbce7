// Schedule JSON (reshard plan -o): read, then, when it claims small-moe-ep's piece count, checked
// against the scenario (GPUs, full validation) and estimated, as simulate/exec/check do.
#include <nlohmann/json.hpp>

#include "fuzz_common.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"

using namespace reshard::model;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const LoadedScenario sc = load_scenario(std::filesystem::path(reshard::fuzz::source_path("scenarios/small-moe-ep.yaml")));
  static const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    const Schedule s = schedule_from_json(j, "fuzz.json");
    if (s.piece_count != static_cast<std::int32_t>(ts.pieces.size())) return 0;
    check_gpus(s, sc.topology.gpu_count());
    validate(s, ts, sc.inventory, sc.source, sc.destination);
    estimate(s, ts, sc.inventory, sc.topology, CostParams{});
  } catch (const Error&) {
  }
  return 0;
}
