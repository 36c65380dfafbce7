// The nccl backend's driver (nccl_backend.cpp), apart from how it is launched: its session (the
// communicator and the compiled run, kept between the runs of a Refit), the world of processes it
// runs in, and the run on a Device -- the CUDA device, or in the tests the host twin, with a
// stand-in for NCCL loaded like NCCL (load_nccl_library).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "device_run.hpp"
#include "nccl_api.hpp"
#include "outcome.hpp"

namespace reshard::exec::detail {

// A process's run compiled once: its layout, each step's waves and the ids of their lists.
struct NcclRun {
  DeviceRun run;
  std::vector<NcclStep> steps;
  std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>> lists;  // per step, per wave: (pack, unpack) list ids, -1 for none
  Verification verification = Verification::Pattern;
  bool faults = false;
  int world = 0;
  bool compiled = false;
};

// What the nccl backend keeps between the runs of one Refit: its communicator (made by the first
// run, destroyed with the session or replaced after an abort), its device and compiled run.
struct NcclSession : BackendSession {
  std::shared_ptr<void> hold;         // MPI held initialised while the session lives (an MPI build's)
  const NcclApi* api = nullptr;       // the library's entry points
  ncclComm_t comm = nullptr;
  std::int64_t communicators = 0;     // communicators made (ncclCommInitRank) over its runs
  std::unique_ptr<Device> device;
  NcclRun run;
  ~NcclSession() override;
};

// The processes of a run: alone here (world size 1, the id made here), or an MPI launch
// (nccl_backend.cpp: one process per GPU, the NCCL id broadcast over MPI).
struct NcclWorld {
  int rank = 0, world = 1;
  virtual ~NcclWorld() = default;
  virtual void barrier() {}
  virtual void share_id(ncclUniqueId&) {}
  virtual void setup_done() {}
  [[noreturn]] virtual void go_silent(double timeout_s);
  virtual RunResult finish(const RunPlan& plan, const ExecOptions& options, LocalOutcome& out);
};

// Lays out this process's GPUs and compiles their steps into waves and lists on `dev`.
void compile_nccl(NcclRun& c, Device& dev, const RunPlan& plan, const ExecOptions& options, int rank, int world);
// One run: the session's communicator (made if it has none), its compiled run (compiled again when
// the buffers, the verification or the faults changed), the waves, verification.
RunResult run_nccl_on(Device& dev, NcclSession& session, NcclWorld& w, const RunPlan& plan, const ExecOptions& options);

}  // namespace reshard::exec::detail
