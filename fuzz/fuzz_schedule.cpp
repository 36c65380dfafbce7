// Schedule JSON (reshard plan -o): read, then, when it claims small-moe-ep's piece count, checked
// against the scenario (GPUs, full validation) and estimated, as simulate/exec/check do.
#include <nlohmann/json.hpp>

#include "fuzz_schedule_check.hpp"
#include "reshard/model/errors.hpp"

using namespace reshard::model;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    reshard::fuzz::check_against_small_moe_ep(schedule_from_json(j, "fuzz.json"));
  } catch (const Error&) {
  }
  return 0;
}
