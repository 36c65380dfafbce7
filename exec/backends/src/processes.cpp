#include "reshard/exec/processes.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>

#include "reshard/exec/executor.hpp"

#ifdef RESHARD_HAVE_MPI
#include <mpi.h>
#endif

namespace reshard::exec {

namespace {
// Set by mpirun/mpiexec (Open MPI, PMIx, MPICH's hydra) in every process it starts.
bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(var)) return true;
  return false;
}

#ifdef RESHARD_HAVE_MPI
// Waits for a nonblocking collective, asleep between tests (10 us, doubling up to 1 ms): Open MPI's
// blocking collectives poll at full speed, so a process waiting for the others' share of a batch
// would take a core from them wherever the cores are fewer than the processes' threads.
void wait_asleep(MPI_Request& request) {
  for (int done = 0, pause_us = 10;; pause_us = std::min(2 * pause_us, 1000)) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
  }
}
#endif
}  // namespace

ProcessGroup::ProcessGroup() {
  if (!launched_by_mpi()) return;
#ifdef RESHARD_HAVE_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    MPI_Init(nullptr, nullptr);
    initialized_here_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
#else
  throw ExecError("started by an MPI launcher, but this build has no MPI (every process would do all the work); "
                  "run it without mpirun or rebuild with MPI",
                  -1, -1);
#endif
}

ProcessGroup::~ProcessGroup() {
#ifdef RESHARD_HAVE_MPI
  if (initialized_here_) MPI_Finalize();
#endif
}

std::vector<std::string> ProcessGroup::gather(const std::string& mine) const {
  if (size_ == 1) return {mine};
#ifdef RESHARD_HAVE_MPI
  if (mine.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw ExecError("rank " + std::to_string(rank_) + " has " + std::to_string(mine.size()) +
                        " bytes to gather, more than one MPI message holds",
                    rank_, 0);
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size_)), offsets(static_cast<std::size_t>(size_));
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (rank_ == 0) {
    long long total = 0;
    for (int r = 0; r < size_; ++r) {
      offsets[static_cast<std::size_t>(r)] = static_cast<int>(total);
      total += lengths[static_cast<std::size_t>(r)];
    }
    if (total > std::numeric_limits<int>::max())
      throw ExecError("the processes' results (" + std::to_string(total) + " bytes) exceed one MPI message", 0, -1, true);
    all.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank_ != 0) return {};
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r)
    out.push_back(all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                             static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)])));
  return out;
#else
  return {mine};
#endif
}

std::vector<std::string> ProcessGroup::all_gather(const std::string& mine) const {
  if (size_ == 1) return {mine};
#ifdef RESHARD_HAVE_MPI
  // The lengths first, as 64-bit counts: every process sees the same total and throws alike when
  // the texts exceed one message.
  const auto length = static_cast<long long>(mine.size());
  const auto n = static_cast<std::size_t>(size_);
  std::vector<long long> lengths(n);
  MPI_Request request;
  MPI_Iallgather(&length, 1, MPI_LONG_LONG, lengths.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD, &request);
  wait_asleep(request);
  long long total = 0;
  for (long long l : lengths) total += l;
  if (total > std::numeric_limits<int>::max())
    throw ExecError("the processes' results (" + std::to_string(total) + " bytes) exceed one MPI message", rank_, -1);
  std::vector<int> counts(n), offsets(n);
  for (std::size_t r = 0; r < n; ++r) {
    counts[r] = static_cast<int>(lengths[r]);
    offsets[r] = r == 0 ? 0 : offsets[r - 1] + counts[r - 1];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Iallgatherv(mine.data(), static_cast<int>(length), MPI_CHAR, all.data(), counts.data(), offsets.data(), MPI_CHAR,
                  MPI_COMM_WORLD, &request);
  wait_asleep(request);
  std::vector<std::string> out;
  for (std::size_t r = 0; r < n; ++r)
    out.push_back(all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(counts[r])));
  return out;
#else
  return {mine};
#endif
}

}  // namespace reshard::exec
