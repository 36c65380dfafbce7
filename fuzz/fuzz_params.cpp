// Cost parameter YAML (params/*.yaml, read by compare --params).
#include "fuzz_common.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    reshard::model::CostParams::load(reshard::fuzz::write_scratch("params.yaml", reshard::fuzz::text_of(data, size)));
  } catch (const reshard::model::Error&) {
  }
  return 0;
}
