// The host backend's cost model: the time `reshard exec --backend host` takes on this machine, from
// the schedule and the constants `reshard bench-host` measures here (exec/host_bench.hpp says how
// each is measured). Nothing in it is fitted to runs; it predicts runs it has never seen.
//
// The host backend (exec/backends/src/host_backend.cpp, docs/execution.md) runs one process per GPU or
// folds GPUs onto fewer processes (GPU number i of the run's sorted GPU list in process i mod P).
// Every operation streams its B bytes in chunks of c (model/memory.hpp) along its hops (a transfer:
// src -> dst; a chain op: its tree). Its processes poll MPI and sleep when nothing moved, so with
// more processes than cores the machine's cores are shared by whichever process has work. So a
// step's time is the largest of three bounds: the whole machine's work over its cores, the busiest
// process's own work, and the latency of the longest dependent path.
//
// Per step k (model::op_steps), summed over its operations o and their hops (a, b):
//   X_k   = sum of B(o) over hops whose two GPUs run in different processes (MPI moves it: chunks by
//           MPI_Isend/MPI_Irecv, out of and into staging no message has used before)
//   Y_k   = sum of B(o) for the root's pack, each receiver's unpack (B: an upper bound, a receiver
//           unpacks only what it needs) and each hop inside one process (MPI copies it in place)
//   M_k   = sum of ceil(B(o) / c) over hops between processes: the messages
//   K_k   = ordered process pairs (sender, receiver) exchanging their first message of the run in k
//   A_p   = the fresh memory process p touches when step k opens: how far its staging of step k
//           (rings, kept receives; model/memory.hpp) exceeds its high-water mark so far. A GPU's
//           first step with an operation is allocated before the clock starts, and a process's heap
//           reuses what it freed, so only growth costs.
// and the same per process p (X_p, Y_p, K_p: what p receives, packs and unpacks, first hears from).
//
//   s      = min(N, cores): the cores the benchmark's N processes shared
//   f      = s / min(P, cores): a run of P processes on fewer cores than the benchmark used gets that
//            share of the machine's rates
//   T_mach = f (X_k / transport_rate_all + Y_k / copy_rate_all + K_k connect_time + M_k message_time)
//            (the whole machine: every process's work on the shared cores)
//   T_proc = max over p of X_p / transport_rate + Y_p / copy_rate + K_p connect_time s
//            (one process: its own work on one core; an all-process constant times s is one
//            process's cost)
//   T_path = max over chains (and plain transfers) of the step: H λ + (sum of its ops' B + (H - 1) c')
//            / transport_rate, H its depth (1 for a transfer), c' = min(c, B), λ = message_latency: a
//            chunk's hop waits for its receiver's next poll; ops on one chain follow each other. With
//            every hop inside one process: (B + (H - 1) c') / copy_rate
//   T_open = max over p of A_p s / touch_rate_all  (its sends of the step wait for it)
//   T_k    = T_open + max(T_mach, T_proc, T_path)
//   T      = sum over steps of T_k + (steps - 1) λ        (a step's first op waits for the poll
//                                                          that sees the step before finish)
// The barrier the benchmark also measures is not in T: the backend's one MPI_Barrier comes before
// the clock starts. What the model leaves out: docs/limitations.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "reshard/model/schedule.hpp"
#include "reshard/model/units.hpp"

namespace reshard::model {

// The host profile: what `reshard bench-host` measured (exec/host_bench.hpp says how), nothing
// fitted. Every field is required in its file.
struct HostProfile {
  std::string profile = "host";
  std::string machine;             // what it ran on (a note, not used by the model)
  std::int32_t cores = 1;          // CPUs the processes may run on
  std::int32_t processes = 2;      // N, the processes the benchmark ran with
  BytesPerSecond copy_rate{1};     // memcpy, one process alone
  BytesPerSecond copy_rate_all{1}; // memcpy, N processes at once: their sum
  BytesPerSecond touch_rate_all{1};      // writing memory never used before, N processes at once: their sum
  BytesPerSecond transport_rate{1};      // MPI moving fresh memory between two processes, the others idle
  BytesPerSecond transport_rate_all{1};  // the same, every process sending and receiving at once: their sum
  Seconds connect_time{0};         // a pair's first message in a launch, per ordered pair, all pairs at once
  Seconds message_time{0};         // a small message, per message, every pair exchanging at once
  Seconds message_latency{0};      // λ: one-way, a small message, polled as the host backend polls
  Seconds barrier{0};              // MPI_Barrier over N processes (recorded; not in the prediction)

  // Reads a profile file (`profile: host` and every key above; rates with a unit, "12.5GBps";
  // times with a unit, "85us"; cores and processes integers >= 1). ConfigError naming the file,
  // line and key for a missing key, an unknown key, a value that is not positive, another profile.
  static HostProfile load(const std::filesystem::path& path);
  // Whether a parameters file is a host profile (its `profile` key says host), so that a reader
  // taking either kind (`reshard check --params`) knows which to load. ConfigError for a file that
  // is not YAML.
  static bool is_host_profile(const std::filesystem::path& path);
  // Writes it as load reads it, each constant with its unit and a comment saying what it means.
  void save(const std::filesystem::path& path) const;
};

// One step's prediction and its terms (above).
struct HostStep {
  std::int32_t step = 0;
  std::int64_t ops = 0;
  Seconds time;     // T_k
  Seconds machine;  // T_mach
  Seconds process;  // T_proc
  Seconds path;     // T_path
  Seconds open;     // T_open
  Bytes transported, copied, touched;  // X_k, Y_k, A_k
  std::int64_t messages = 0, pairs = 0;  // M_k, K_k
};

struct HostPrediction {
  Seconds time;  // T
  std::vector<HostStep> steps;
  std::int32_t processes = 1;
};

// The prediction for a run of `s` by `processes` processes over `gpus` (the run's GPUs, sorted, as
// exec::RunPlan::gpus lists them: GPU gpus[i] in process i mod processes). Throws ScheduleError
// for an op list op_problem refuses or an op naming a GPU outside `gpus`, PlanError for
// processes < 1.
HostPrediction estimate_host(const Schedule& s, const std::vector<GpuId>& gpus, std::int32_t processes,
                             const HostProfile& profile);

}  // namespace reshard::model
