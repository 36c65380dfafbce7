// A run's Measurement (the value and its reader: model/measurement.hpp) as a backend writes it, and
// its comparison with the cost model, step by step: what `reshard exec -o` and `reshard check` do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "reshard/exec/program.hpp"
#include "reshard/model/device_cost.hpp"
#include "reshard/model/host_cost.hpp"
#include "reshard/model/measurement.hpp"

namespace reshard::exec {

using model::GpuStaging;
using model::load_measurement;
using model::MeasuredOpTiming;
using model::Measurement;

nlohmann::json to_json(const Measurement& m, const RunPlan& plan);
struct StepComparison {
  std::int32_t step = 0;  // -1: the whole run
  std::int64_t ops = 0;
  std::int64_t bytes = 0;
  double predicted_s = 0, measured_s = 0;
  double error() const { return predicted_s > 0 ? (measured_s - predicted_s) / predicted_s : 0; }
};
// The Prediction (model::estimate with the measurement's cost parameters file, else its profile) of
// each step's operations
// alone, and of the whole schedule, against the measured span of the step (last end - first start).
std::vector<StepComparison> compare_with_prediction(const Measurement& m);
// The same with the host backend's own model (model/host_cost.hpp, a profile `reshard bench-host`
// measured) for a Measurement of the host backend: its schedule, GPUs and processes (ranks). A
// Measurement of another backend is a ConfigError naming `file` (the measurement) and its key
// `backend`. `terms`, when given, gets the prediction with each step's terms.
std::vector<StepComparison> compare_with_host_model(const Measurement& m, const model::HostProfile& profile,
                                                    const std::string& file, model::HostPrediction* terms = nullptr);
// The same with the cuda backend's own model (model/device_cost.hpp, a device profile) for a
// Measurement of the cuda backend (every GPU a virtual rank on one device). A Measurement of another
// backend is a ConfigError naming `file` and its key `backend`.
std::vector<StepComparison> compare_with_device_model(const Measurement& m, const model::DeviceProfile& profile,
                                                      const std::string& file, model::DevicePrediction* terms = nullptr);

// The staging memory each GPU held at most (Measurement::staging) against model::staging_memory's
// peak for it; empty when the run did not measure it.
struct StagingComparison {
  model::GpuId gpu = -1;
  std::int64_t predicted_bytes = 0, measured_bytes = 0;
  double error() const {
    return predicted_bytes > 0 ? static_cast<double>(measured_bytes - predicted_bytes) / static_cast<double>(predicted_bytes) : 0;
  }
};
std::vector<StagingComparison> compare_staging(const Measurement& m);

}  // namespace reshard::exec
