// A Measurement: what `reshard exec -o` (exec::to_json) writes of a run of a schedule -- its
// scenario and overrides, the schedule, every operation's measured times, how it was verified, the
// staging each GPU held -- and the one reader of such a file, which `reshard check`, `reshard
// calibrate` and their tests share. The value flows from exec (which runs and writes it) to the
// commands and studies that compare it with the model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "reshard/model/defaults.hpp"
#include "reshard/model/overrides.hpp"
#include "reshard/model/schedule.hpp"

namespace reshard::model {

// How a run was verified (docs/execution.md, exec/verify.hpp): pattern, digest or none.
enum class Verification : std::uint8_t { Pattern, Digest, None };
const char* to_string(Verification v);
// "pattern", "digest" or "none"; ConfigError naming `key` otherwise.
Verification verification_named(const std::string& name, const std::string& key = "--verify");

// A plain transfer: start = the sender posted it, end = the receiver has it. A chain op: start = the
// root posted its first chunk, end = the last GPU of the tree has every chunk (merged over ranks:
// the latest).
struct MeasuredOpTiming {
  double start_s = -1, end_s = -1;  // from the common start; -1: not run here
};

// The host API calls a GPU backend's timed run made (docs/execution.md, "The GPU engine"):
// kernel launches, memory copies and sets, NCCL calls (group starts and ends, sends, receives),
// waits (one per wait, however often it polls) and event records and reads; `per_step[k]` the calls
// issued for step k (the calls of the run's start and end are in none).
struct HostCalls {
  std::int64_t launches = 0, copies = 0, nccl = 0, syncs = 0, events = 0;
  std::vector<std::int64_t> per_step;
  std::int64_t total() const { return launches + copies + nccl + syncs + events; }
  bool operator==(const HostCalls&) const = default;
};

struct GpuStaging {
  GpuId gpu = -1;
  std::int64_t bytes = 0;
};

struct Measurement {
  std::string scenario_path;   // absolute
  std::vector<std::string> scenario_sets;  // `--set KEY=VALUE` overrides of the scenario (paths absolute)
  std::string backend;
  std::string profile = kDefaultProfile;
  std::string params_file;     // absolute; a cost parameters file (`--params`) that replaces the profile
  std::int32_t ranks = 0;      // processes
  Schedule schedule;    // embedded, so check/calibrate rebuild nothing by guesswork
  std::vector<MeasuredOpTiming> ops;   // per op id
  double elapsed_s = 0;
  std::int64_t bytes_verified = 0;
  bool verified = false;
  Verification verification = Verification::Pattern;  // how it was verified (exec/verify.hpp)
  // The staging memory each GPU held at most (the host backend counts the bytes it allocates for
  // send and receive regions; empty: the backend does not measure it), by GPU.
  std::vector<GpuStaging> staging;
  // The cuda backend: the bytes its copies moved in device memory during the run (packs, unpacks,
  // local copies and the copies between GPUs' slots); 0 where not counted. Over elapsed_s it is the
  // backend's copy rate, which the GPU check compares with a plain device-to-device copy.
  std::int64_t device_copy_bytes = 0;
  // The GPU backends: the host API calls of the timed run; absent where not counted (the host backend).
  std::optional<HostCalls> host_calls;
};

// Reads a Measurement file (throws ConfigError naming the file and the JSON path of a bad value).
// Unless `accept_unverified`, a file whose digest does not match its content or its scenario's
// files, or whose run was not verified, is refused (model/digest.hpp). `scenario_file`, when given,
// replaces the scenario path the file records (a run measured on another machine, its scenario
// copied there); its digest is checked all the same.
Measurement load_measurement(const std::filesystem::path& path, bool accept_unverified = false,
                             const std::filesystem::path& scenario_file = {});

// The `--set KEY=VALUE` overrides a Measurement records, parsed (the scenario as the run had it).
std::vector<Override> measurement_overrides(const Measurement& m);

}  // namespace reshard::model
