// The cuda backend's cost model: the time `reshard exec --backend cuda` takes on one GPU, from the
// schedule, the CUDA calls the backend issues (counted from its source,
// exec/backends/src/cuda_backend.cpp) and two constants of the device and its host: the time one
// call takes to issue, and the device's copy rate.
//
// The cuda backend runs every GPU of the scenario as a virtual rank on one device, driven by one
// host thread. Each step is compiled once into a device copy list (exec/step_lists.hpp) and run as
// one kernel launch that walks it: every byte is copied on the one device, packed at the root,
// copied along each hop and unpacked at each receiver, with the rings' flow control on the device.
// So a step's time is the larger of its launch and the device's copying:
//
// Per operation o with B bytes, its hops (a transfer: src -> dst; a chain op: its tree's hops), H
// of them:
//   copied(o) = B (1 + 2 H)
//               the pack, each hop's copy and each receiver's unpack (an upper bound: a receiver
//               unpacks only what it needs; every receiver of a transfer needs it all)
// Per step k (model::op_steps), with t_call and R the profile's call time and copy rate:
//   T_issue,k = t_call (one launch)
//   T_copy,k  = sum over o in k of copied(o) / R
//   T_k       = max(T_issue,k, T_copy,k)
//   T         = sum over steps of T_k
// What it leaves out: the run's 7 calls outside its clock (a reset, two events, a wait, their time,
// the stamps' copy and its wait), the walk's waits on its counters (a chunk's task waits for its
// parent's), and copies slower than R when they are small (R is the rate of large copies). The
// per-chunk engine this replaced was measured on an H200 (docs/validation.md, "The engine:
// predicted against measured"); the list engine has not yet run on a GPU.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "reshard/model/schedule.hpp"
#include "reshard/model/units.hpp"

namespace reshard::model {

// The device profile: one GPU and the host thread that drives it. Every field is required in its
// file.
struct DeviceProfile {
  std::string profile = "device";
  std::string machine;          // what it was measured on (a note, not used by the model)
  Seconds call_time{0};         // t_call: the host's time per CUDA call the backend issues
  BytesPerSecond copy_rate{1};  // R: device-to-device copy payload, large copies
  std::string call_time_source; // where t_call comes from (a note: measured, or fitted to which run)
  std::string copy_rate_source; // where R comes from (a note)

  // Reads a profile file (`profile: device` and every key above; call_time with a unit, "2.3us";
  // copy_rate with a unit, "2148GBps"). ConfigError naming the file, line and key for a missing
  // key, an unknown key, a value that is not positive, another profile.
  static DeviceProfile load(const std::filesystem::path& path);
  // Whether a parameters file is a device profile (its `profile` key says device). ConfigError
  // for a file that is not YAML.
  static bool is_device_profile(const std::filesystem::path& path);
};

// One step's prediction and its terms (above).
struct DeviceStep {
  std::int32_t step = 0;
  std::int64_t ops = 0;
  Seconds time;    // T_k
  Seconds issue;   // T_issue,k
  Seconds copy;    // T_copy,k
  std::int64_t calls = 0;
  Bytes copied;
};

struct DevicePrediction {
  Seconds time;  // T
  std::vector<DeviceStep> steps;
  std::int64_t calls = 0;
  Bytes copied;
};

// The prediction for a cuda-backend run of `s` (above). Throws ScheduleError for an op list
// op_problem refuses.
DevicePrediction estimate_device(const Schedule& s, const DeviceProfile& profile);

}  // namespace reshard::model
