#include "reshard/exec/processes.hpp"

#include <cstdlib>
#include <limits>

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

}  // namespace reshard::exec
