// Model architecture YAML (models/*.yaml): parsed and built into an inventory. Models are capped
// at 5 000 tensors (checked::ReadLimits): a larger one is refused at its num_hidden_layers key, so
// each input stays cheap; fuzz/corpus/model holds the shipped architectures cut to a few layers.
#include "fuzz_common.hpp"
#include "reshard/model/checked.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/inventory.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto limits = reshard::model::checked::read_limits();
  limits.tensors = 5'000;
  reshard::model::checked::set_read_limits(limits);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    reshard::model::Inventory::parse(reshard::fuzz::text_of(data, size), "fuzz.yaml");
  } catch (const reshard::model::Error&) {
  }
  return 0;
}
