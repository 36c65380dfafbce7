// MPI pieces shared by the host and nccl backends (only compiled with MPI).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backend_impl.hpp"
#include "host_memory.hpp"
#include "outcome.hpp"

namespace reshard::exec::detail {

class SetupWatchdog;

// How long the host backend sleeps when a pass over its requests moved nothing (and how
// bench-host's processes idle, exec/host_bench.hpp): the host cost model's latency is measured with it.
inline constexpr std::chrono::microseconds kIdleSleep{20};

// MPI initialised for the lifetime of a Refit's session (its runs then find it initialised):
// initialised here unless it already was, finalised at the end only if it was initialised here.
struct MpiHold {
  bool initialized_here = false;
  MpiHold();
  ~MpiHold();
  MpiHold(const MpiHold&) = delete;
  MpiHold& operator=(const MpiHold&) = delete;
};

struct MpiWorld {
  int rank = 0, world = 1;
  bool initialized_here = false;
  std::shared_ptr<SetupWatchdog> watchdog;  // armed from mpi_start until setup_done
};

// The run's setup under the timeout. A blocking MPI call (MPI_Init, a collective) waits forever for
// a process that never arrives, and cannot be interrupted; so a watchdog thread, started before
// MPI_Init, prints one line and ends this process (std::_Exit, the one exit in the library: nothing
// else can leave a blocked MPI call) when setup has not finished `timeout_s` after it began; the
// launcher then ends the others. After MPI_Init every process announces itself to rank 0, which
// waits until `timeout_s` after setup began and throws ExecError naming the first rank that never
// arrived (stopped, or stuck before MPI_Init ended); its watchdog waits while it does. The
// watchdogs fire where nothing else can answer (a blocking call): rank 0's 1.5 s after the
// timeout, rank 1's 3 s, the others' 4.5 s, so one process reports, within the timeout + 5 s.
MpiWorld mpi_start(const ExecOptions& options);
// Setup finished (call after the last setup collective): the watchdog stands down.
void setup_done(MpiWorld& w);

// Test-only fault: this process stops answering (a dead peer nobody has noticed). A live process
// times out waiting for it and aborts the run; if none does within three timeouts, this throws.
[[noreturn]] void go_silent(const MpiWorld& w, double timeout_s);

// First every process reports completion to rank 0, which waits at most `timeout_s` for each and
// names the first one that never finished; then rank 0 combines every process's outcome (and, for
// digest verification, compares every piece's digests), finalises MPI when this code initialised
// it, and returns the reporter's result (rank 0 throws ExecError naming the first wrong element or
// digest if any process found one; the others return quietly).
RunResult mpi_finish(const RunPlan& plan, const ExecOptions& options, const MpiWorld& w, LocalOutcome& local);

}  // namespace reshard::exec::detail
