// MPI pieces shared by the host and nccl backends (only compiled with MPI).
#pragma once

#include <string>
#include <vector>

#include "backend_impl.hpp"

namespace reshard::exec::detail {

struct MpiWorld {
  int rank = 0, world = 1;
  bool initialized_here = false;
};
MpiWorld mpi_start();  // MPI_Init unless already initialised

// Test-only fault: this process stops answering (a dead peer nobody has noticed). A live process
// times out waiting for it and aborts the run; if none does within three timeouts, this throws.
[[noreturn]] void go_silent(const MpiWorld& w, double timeout_s);

// What one process saw: start times of the operations it sent, end times of those it received
// (-1 elsewhere), the destination bytes it verified, its first verification error ("" if none),
// and its last completion time.
struct LocalOutcome {
  std::vector<double> start, end;
  std::int64_t bytes_verified = 0;
  std::string error;
  double elapsed = 0;
};

// First every process reports completion to rank 0, which waits at most `timeout_s` for each and
// names the first one that never finished; then rank 0 combines every process's outcome, finalises MPI when this code initialised it, and
// returns the reporter's result (rank 0 throws ExecError naming the first wrong element if any
// process found one; the others return quietly).
RunResult mpi_finish(const RunPlan& plan, const ExecOptions& options, const MpiWorld& w, LocalOutcome& local);

}  // namespace reshard::exec::detail
