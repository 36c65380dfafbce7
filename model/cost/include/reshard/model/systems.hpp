// Implementation profiles of other refit systems (docs/validation.md, "Implementation profiles").
//
// A profile is a system's schedule and what its implementation pays beyond the wire:
//   - the schedule: one of reshard's strategies configured the way the system moves the weights
//     (who sends, which groups, the bucket rule), `strategy`, a line parse_strategy() reads;
//   - the cost terms (CostParams, equations in cost.hpp): per call and per tensor, world barriers
//     per call (their time from the topology's latencies), extra copy passes at the GPU's memory
//     bandwidth, concurrent streams. Bandwidth, latency and memory bandwidth come from the topology,
//     never from a fit.
// Every constant is listed with its unit, meaning and source, and whether it was fitted: the fitted
// ones are fitted once, on the calibration subset of params/published-refit.csv (one platform,
// DGX H100), and every other published row is a prediction (scripts/validate.py).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "reshard/model/cost.hpp"

namespace reshard::model {

struct ProfileConstant {
  std::string name;     // the CostParams key ("per_tensor")
  std::string value;    // with its unit ("58.7 us")
  std::string meaning;  // what it stands for in the system
  std::string source;   // where the value comes from: a fit (which rows), a source file, a measurement
  bool fitted = false;  // fitted to measured refit times (the calibration subset) for this profile
  // The fit (profile_fits()) the value comes from: fitted there for this profile (fitted) or carried
  // from another profile's fit; "" for a value taken from a source. fit_constant: its name in that
  // fit, "" when it is `name`.
  std::string fit;
  std::string fit_constant;
};

// A fit of constants to published refit times: its calibration subset (a `reshard calibrate` CSV,
// path from the repository's top), the profile calibrate starts from, the constants it fits and the
// rows of params/published-refit.csv the subset holds. Every other published row is a prediction of
// these constants (scripts/validate.py).
struct ProfileFit {
  std::string name;         // "nemo_rl"
  std::string calibration;  // "params/nemo_rl-published.csv"
  std::string base;         // the base profile ("nemo_rl")
  std::vector<std::string> constants;
  std::vector<std::string> rows;
};

struct SystemProfile {
  std::string name;      // what --profile and `compare --systems` take ("nemo_rl_broadcast")
  std::string system;    // the system, path and version it models
  std::string strategy;  // its schedule, as a configured strategy line
  std::string schedule;  // how the system moves the weights, and where the strategy differs from it
  CostParams cost;
  std::vector<ProfileConstant> constants;
};

// Every implementation profile, in the order `compare --systems all` lists them.
const std::vector<SystemProfile>& system_profiles();
// Every fit the profiles' fitted constants come from, each listed once.
const std::vector<ProfileFit>& profile_fits();
const ProfileFit* find_profile_fit(const std::string& name);
// The profile named `name`, nullptr when there is none.
const SystemProfile* find_system_profile(const std::string& name);
// The names, comma-separated, for error messages and help.
std::string system_profile_names();

// NeMo RL's cost terms, which its two paths (packed broadcast, nccl_reshard) share: the built-in
// profile "nemo_rl".
CostParams nemo_rl_cost();
// miles' cost terms, which its two paths (slime's broadcast, Mooncake P2P) share: the built-in
// profile "miles".
CostParams miles_cost();

// The one table of the cost profiles `--profile` takes besides the system profiles above: each
// one's name, what it models, its terms, and the constants it sets with their sources (what
// `reshard systems NAME` lists; none for a profile whose constants its systems list).
// CostParams::profile_named looks a name up here, then among system_profiles().
struct CostProfile {
  const char* name;
  const char* models;
  CostParams (*make)();
  std::vector<ProfileConstant> (*constants)();
};
const CostProfile* find_cost_profile(const std::string& name);
std::span<const CostProfile> cost_profiles();

}  // namespace reshard::model
