// What a run's processes saw, and the reporter's result from it: shared by the MPI finish
// (mpi_common.cpp, which gathers every process's outcome) and a single process without MPI.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backend_impl.hpp"
#include "host_memory.hpp"

namespace reshard::exec::detail {

// What one process saw: start times of the operations it sent, end times of those it received
// (-1 elsewhere), the destination bytes it verified, its first verification error ("" if none),
// and its last completion time.
struct LocalOutcome {
  std::vector<double> start, end;
  std::int64_t bytes_verified = 0;
  std::string error;
  double elapsed = 0;
  // Per GPU of the plan (RunPlan::gpus order): the peak staging bytes it held, for the GPUs this
  // process ran; -1 for the others. Empty: the backend does not measure it.
  std::vector<std::int64_t> staging;
  // Verification::Digest: the digests of the pieces its GPUs hold or need (host_memory.hpp).
  std::vector<PieceDigest> digests;
  // The GPU backends: the host API calls of its timed run (the reporter's go into the Measurement).
  std::optional<model::HostCalls> host_calls;
};

// The reporter's result from the outcomes merged over the processes (`merged`: start and end the
// latest, bytes summed, elapsed the longest, staging per GPU; `errors`: each process's first
// verification error, "" for none; `digests`: every process's, for Verification::Digest). Throws
// ExecError naming the first wrong element or digest.
RunResult reporter_result(const RunPlan& plan, const ExecOptions& options, int world, const LocalOutcome& merged,
                          const std::vector<std::string>& errors, std::vector<PieceDigest> digests);

}  // namespace reshard::exec::detail
