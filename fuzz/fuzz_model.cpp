// Model architecture YAML (models/*.yaml): parsed and built into an inventory.
#include "fuzz_common.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/inventory.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    reshard::model::Inventory::parse(reshard::fuzz::text_of(data, size), "fuzz.yaml");
  } catch (const reshard::model::Error&) {
  }
  return 0;
}
