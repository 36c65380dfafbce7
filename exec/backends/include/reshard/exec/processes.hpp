// The processes of an MPI launch, for work split over them (`mpirun -np N reshard sweep`: each
// takes its share, rank 0 gathers the results; `mpirun -np N reshard compare`: each takes its share
// of every batch, and all of them get every result, model::Processes). Without a launcher this is
// one process, rank 0 of 1.
#pragma once

#include <string>
#include <vector>

#include "reshard/model/parallel.hpp"

namespace reshard::exec {

class ProcessGroup : public model::Processes {
 public:
  // Joins MPI when started by an MPI launcher (MPI_Init unless already initialised). A build
  // without MPI started by a launcher throws ExecError: every process would do all the work.
  ProcessGroup();
  ~ProcessGroup();  // MPI_Finalize when this object initialised MPI
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Collective: rank 0 gets every process's text in rank order; the others get an empty vector.
  std::vector<std::string> gather(const std::string& mine) const;
  // Collective: every process gets every process's text in rank order, waiting asleep (it does not
  // poll at full speed, as MPI's blocking collectives do). Texts of more than one MPI message holds
  // together (2^31 - 1 bytes) are an ExecError on every process.
  std::vector<std::string> all_gather(const std::string& mine) const override;

 private:
  int rank_ = 0, size_ = 1;
  bool initialized_here_ = false;
};

}  // namespace reshard::exec
