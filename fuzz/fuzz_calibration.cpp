// Calibration CSV (calibrate): scenario,strategy,measured_s rows, each planned, scheduled and
// estimated. The CSV is written to scratch/params/ next to links to the shipped scenarios, models
// and topologies, so "../scenarios/small-moe-ep.yaml" names a shipped scenario.
#include "fuzz_common.hpp"
#include "reshard/model/calibrate.hpp"
#include "reshard/model/errors.hpp"

using namespace reshard;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool linked = [] {
    std::filesystem::create_directories(fuzz::scratch_dir() / "params");
    for (const char* d : {"scenarios", "models", "topologies"})
      if (!std::filesystem::exists(fuzz::scratch_dir() / d))
        std::filesystem::create_directory_symlink(fuzz::source_path(d), fuzz::scratch_dir() / d);
    return true;
  }();
  (void)linked;
  try {
    model::observations_from_csv(fuzz::write_scratch("params/fuzz.csv", fuzz::text_of(data, size)), model::CostParams{});
  } catch (const model::Error&) {
  }
  return 0;
}
