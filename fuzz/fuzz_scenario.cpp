// Scenario YAML (scenarios/*.yaml): parsed (layouts, GPU lists); the model and topology files it
// names are not read, so the fuzzer never opens files of its choosing.
#include "fuzz_common.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    reshard::model::Scenario::parse(reshard::fuzz::text_of(data, size), "fuzz.yaml",
                                    reshard::fuzz::source_path("scenarios"));
  } catch (const reshard::model::Error&) {
  }
  return 0;
}
