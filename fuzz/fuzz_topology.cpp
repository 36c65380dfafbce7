// Topology YAML (topologies/*.yaml). Generated clusters are capped at 256 GPUs
// (checked::ReadLimits), so each input stays cheap; fuzz/corpus/topology holds the frontier
// topology's shape (pods and core switches) on 3 racks (216 GPUs).
#include "fuzz_common.hpp"
#include "reshard/model/checked.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/topology.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto limits = reshard::model::checked::read_limits();
  limits.gpus = 256;
  reshard::model::checked::set_read_limits(limits);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    reshard::model::Topology::parse(reshard::fuzz::text_of(data, size), "fuzz.yaml");
  } catch (const reshard::model::Error&) {
  }
  return 0;
}
