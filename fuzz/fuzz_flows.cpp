// Traffic CSV (simulate --flows): read, then turned into flows on a two-node DGX H100 topology.
#include "fuzz_common.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/sim/traffic.hpp"

using namespace reshard;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const model::Topology topo = model::Topology::load(fuzz::source_path("topologies/dgx-h100-2n.yaml"));
  try {
    const auto transfers = sim::read_transfers_csv(fuzz::write_scratch("flows.csv", fuzz::text_of(data, size)));
    sim::traffic_flows(topo, transfers, "fuzz.csv");
  } catch (const model::Error&) {
  }
  return 0;
}
