// Calibration CSV (calibrate): scenario,strategy,measured_s rows. The reader (read_measured_runs)
// checks every row; the first row is then planned, scheduled and estimated (observe_runs). Only the
// first: each row builds a schedule, which under the sanitizers costs milliseconds to seconds, and a
// later row runs the same code on another scenario or strategy, which the fuzzer reaches as the
// first row of another input (tests/test_calibrate.cpp reads CSVs of several rows). The CSV is
// written to scratch/params/ next to links to the shipped scenarios, models and topologies, so
// "../scenarios/small-moe-ep.yaml" names a shipped scenario.
#include "fuzz_common.hpp"
#include "reshard/study/calibrate.hpp"
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
    const auto csv = fuzz::write_scratch("params/fuzz.csv", fuzz::text_of(data, size));
    auto runs = study::read_measured_runs(csv);
    if (runs.size() > 1) runs.resize(1);
    study::observe_runs(csv, runs, model::CostParams{});
  } catch (const model::Error&) {
  }
  return 0;
}
