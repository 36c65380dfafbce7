// Measurement JSON (reshard exec -o), as calibrate reads it: the document's scenario path is
// replaced by the shipped small-gqa-megatron-vllm scenario (the fuzzer never opens files of its
// choosing), the digest is not required (--accept-unverified), the schedule is validated and estimated.
#include <nlohmann/json.hpp>

#include "fuzz_common.hpp"
#include "reshard/study/calibrate.hpp"
#include "reshard/model/errors.hpp"

using namespace reshard::model;
using namespace reshard::study;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  if (j.is_object() && j.contains("scenario"))
    j["scenario"] = reshard::fuzz::source_path("scenarios/small-gqa-megatron-vllm.yaml");
  try {
    observations_from_csv(reshard::fuzz::write_scratch("measurement.json", j.dump()), CostParams{}, true);
  } catch (const Error&) {
  }
  return 0;
}
