// Backend entry points behind execute() (executor.cpp dispatches on ExecOptions::backend).
#pragma once

#include <string>

#include "reshard/exec/executor.hpp"

namespace reshard::exec::detail {

RunResult run_host(const RunPlan& plan, const ExecOptions& options);   // host_backend.cpp (MPI)
RunResult run_cuda(const RunPlan& plan, const ExecOptions& options);   // cuda_backend.cpp (CUDA)
RunResult run_nccl(const RunPlan& plan, const ExecOptions& options);   // nccl_backend.cpp (CUDA + NCCL; MPI when built with it)
// The host backend's session: MPI initialised for its lifetime (finalised at the end when it
// initialised it) and the run's communicator, duplicated once (host_backend.cpp; null without MPI).
std::shared_ptr<BackendSession> open_host_session();
// The GPU backends' sessions: the device, the layout and the compiled lists kept between runs while
// the caller's buffers stay the same; nccl's also its communicator (and MPI held initialised).
std::shared_ptr<BackendSession> open_cuda_session();   // cuda_backend.cpp
std::shared_ptr<BackendSession> open_nccl_session();   // nccl_backend.cpp

// The measurement skeleton every backend fills in.
Measurement new_measurement(const RunPlan& plan, const ExecOptions& options, int world);
// The GPUs process `rank` of `world` runs: GPU number i goes to process i mod world.
std::vector<model::GpuId> gpus_of_process(const RunPlan& plan, int rank, int world);
inline int process_of(const RunPlan& plan, model::GpuId g, int world) { return plan.gpu_index(g) % world; }
// The error every MPI backend raises on process `rank` when `world` processes were started for a
// schedule on fewer GPUs (one process runs one GPU or more, never none).
ExecError too_many_processes(const RunPlan& plan, int world, int rank);

}  // namespace reshard::exec::detail
