// Calibration: fit an implementation profile's free parameters to measured refit times.
//
// Each observation is a schedule with a measured time t. Its prediction is linear in the
// overhead parameters x = (per_tensor, per_broadcast_tensor, per_bucket, per_stage):
//     t_hat = h + f + a . x
// where h is the schedule's hardware time (estimate with zero overheads), f the host work no
// fitted constant multiplies (the receive side's load and reads, cost.hpp) and a = (tensors moved by
// reshard operations, tensors moved by gather/broadcast, broadcast buckets, broadcasting source
// stages); with overlapping host work, s + max(h + copies, f + a . x), s what overlaps nothing
// (T_serial). Only the parameters named free are fitted; the others keep the base value. The fit minimises the
// sum of squared *relative* errors, sum_i ((h_i + a_i . x - t_i) / t_i)^2, subject to x >= 0 (an
// overhead cannot be negative): weighted least squares (Eigen, column-pivoting QR) on every subset
// of the parameters, the best feasible subset wins. Parameters no observation informs (a zero
// column) stay at the base profile's value.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "reshard/model/cost.hpp"

namespace reshard::study {

using model::CostParams;
using model::Seconds;
using model::StrategyParams;

inline constexpr int kOverheadParams = 6;
// Names of the constants a fit may choose, in the order of Observation::counts: four durations
// (CostParams's per_* overheads), copy_passes, a count whose term is T_copy (cost.hpp), and
// per_call_rank, a duration.
inline constexpr const char* kOverheadNames[kOverheadParams] = {"per_tensor", "per_broadcast_tensor", "per_bucket",
                                                                "per_stage", "copy_passes", "per_call_rank"};
// Constant k of p: seconds for the durations, passes for copy_passes.
double overhead_value(const CostParams& p, int k);
void set_overhead_value(CostParams& p, int k, double value);
// "12.9 ms", or "1.85 passes" for copy_passes.
std::string format_overhead(int k, double value);

struct Observation {
  std::string label;  // "deepseek-v3-h100 gather_broadcast"
  Seconds measured;
  Seconds hardware;   // estimate with every fittable constant 0, less the host work below
  Seconds host_fixed; // host work no fittable constant multiplies (the receive side's T_load, T_reads)
  Seconds serial;     // what overlaps nothing (T_serial: a host-memory copy, per_refit)
  double counts[kOverheadParams] = {};  // what each constant multiplies (copy_passes: T_copy of one pass, s)
};

struct CalibrationRow {
  std::string label;
  Seconds measured, predicted;
  double relative_error = 0;  // (predicted - measured) / measured
};

struct Calibration {
  CostParams params;
  std::vector<CalibrationRow> rows;
  double rms_relative_error = 0;
  // Per overhead parameter, in the order of kOverheadNames: points[k], how many observations the
  // constant rests on (those whose count for it is non-zero, whether or not it was fitted);
  // fitted[k], whether the fit chose its value (named free and points[k] > 0; otherwise it keeps
  // the base profile's value).
  int points[kOverheadParams] = {};
  bool fitted[kOverheadParams] = {};
  int fitted_constants = 0;  // how many fitted[k] are true
  // What makes the fit weaker than its rms error suggests, one sentence each: as many fitted
  // constants as observations (or more), so the observations cannot check the fit; a constant
  // named free that no observation informs.
  std::vector<std::string> warnings;
};

// `free`: names from kOverheadNames to fit (empty: all but per_call_rank). Fills every field of Calibration,
// warnings included; throws only on bad input (no observation, an unknown name, a time <= 0).
Calibration calibrate(const std::vector<Observation>& observations, const CostParams& base,
                      const std::vector<std::string>& free = {});

// One row of a measurements CSV: the scenario it ran (resolved against the CSV's folder), the
// strategy and the measured time; `line` is the row's line in the file, for errors.
struct MeasuredRun {
  std::filesystem::path scenario;
  StrategyParams strategy;
  Seconds measured;
  int line = 0;
};

// Reads and checks a measurements CSV without planning anything: a header naming the columns
// `scenario,strategy,measured_s` (others ignored; '#' lines are comments), every row's cells
// present, measured_s finite and positive, strategy a line parse_strategy accepts (e.g.
// "domain_chain max_chain=2"). ConfigError names the file, line and column.
std::vector<MeasuredRun> read_measured_runs(const std::filesystem::path& csv);

// Plans, schedules and estimates each run with `base` (overheads zeroed) to make an Observation;
// a scenario is loaded and planned once for all its rows. ConfigError names `csv` and the row's line.
std::vector<Observation> observe_runs(const std::filesystem::path& csv, const std::vector<MeasuredRun>& runs,
                                      const CostParams& base);

// Reads measured times: a CSV (read_measured_runs, then observe_runs), or a Measurement JSON written
// by `reshard exec -o` (its scenario, the schedule it ran, elapsed_s), estimated with `base`
// (overheads zeroed). A Measurement whose digest does not match or whose run was not verified is
// refused unless `accept_unverified` (model/digest.hpp).
std::vector<Observation> observations_from_csv(const std::filesystem::path& csv, const CostParams& base,
                                               bool accept_unverified = false);

// Writes the params as a YAML file that CostParams::load reads, with the fit's rows as comments.
void write_params(const std::filesystem::path& out, const Calibration& c, const std::string& note);

}  // namespace reshard::study
