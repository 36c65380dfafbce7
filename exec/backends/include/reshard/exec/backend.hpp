// The execution backends (docs/execution.md): the one table of them, each running the
// same per-GPU programs (exec/program.hpp) with the same bounded staging (model/memory.hpp). A
// backend has a name, whether this build has it, what it needs or found, what it can do, and
// its run. execute() (exec/executor.hpp) looks a name up here; `reshard backends` lists the table.
// torch.distributed is a backend too, driven from Python over the same programs (reshard.torch).
#pragma once

#include <string>
#include <vector>

#include "reshard/exec/executor.hpp"

namespace reshard::exec {

struct BackendCaps {
  bool processes = false;         // one process per GPU under an MPI launcher (else one process)
  bool device_memory = false;     // moves GPU memory (else host memory)
  bool precision_change = false;  // runs a scenario with destination.precision
  bool measures_staging = false;  // Measurement::staging: each GPU's staging high-water mark
  bool digest = false;            // Verification::Digest
  bool binding = false;           // caller memory (MemoryBinding) of its memory kind
};

struct Backend {
  const char* name;
  bool available;      // compiled in (its dependency was found at configure time)
  const char* detail;  // what it needs or what it found
  BackendCaps caps;
  RunResult (*run)(const RunPlan& plan, const ExecOptions& options);
  // A session for the runs of one Refit (ExecOptions::session): host, its MPI communicator; cuda,
  // its device, layout and compiled lists; nccl, those and its NCCL communicator.
  std::shared_ptr<BackendSession> (*open_session)();
};

// Every backend, available or not: host, cuda, nccl.
const std::vector<Backend>& backends();
// What the nccl backend loads at run time: "NCCL 2.28.9 (libnccl.so.2)" once the library is
// found and its entry points are loaded (the version read through them), else why not (not built,
// not found: where it looked).
std::string nccl_library();
// The backend called `name`; ExecError listing the names for any other.
const Backend& backend_named(const std::string& name);

}  // namespace reshard::exec
