// Flow dump JSON (simulate --dump-flows): read, then simulated again when it is small.
#include <nlohmann/json.hpp>

#include "fuzz_common.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/sim/flow_io.hpp"
#include "reshard/sim/flow_sim.hpp"

using namespace reshard;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    const sim::FlowDump d = sim::flow_dump_from_json(j, "fuzz.json");
    if (d.flows.size() <= 64) sim::simulate(d.network, d.flows);
  } catch (const model::Error&) {
  }
  return 0;
}
