// The processes of an MPI launch, for work split over them (`mpirun -np N reshard sweep`): each
// takes its share, rank 0 gathers the results. Without a launcher this is one process, rank 0 of 1.
#pragma once

#include <string>
#include <vector>

namespace reshard::exec {

class ProcessGroup {
 public:
  // Joins MPI when started by an MPI launcher (MPI_Init unless already initialised). A build
  // without MPI started by a launcher throws ExecError: every process would do all the work.
  ProcessGroup();
  ~ProcessGroup();  // MPI_Finalize when this object initialised MPI
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Collective: rank 0 gets every process's text in rank order; the others get an empty vector.
  std::vector<std::string> gather(const std::string& mine) const;

 private:
  int rank_ = 0, size_ = 1;
  bool initialized_here_ = false;
};

}  // namespace reshard::exec
