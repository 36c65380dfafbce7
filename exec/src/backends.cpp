#include "reshard/exec/backends.hpp"

namespace reshard::exec {

std::vector<BackendInfo> backends() {
  std::vector<BackendInfo> out;
#ifdef RESHARD_HAVE_MPI
  out.push_back({"host", true, "MPI point-to-point between processes, host memory"});
#else
  out.push_back({"host", false, "needs MPI (Debian libopenmpi-dev) at configure time"});
#endif
#ifdef RESHARD_HAVE_CUDA
  out.push_back({"cuda", true, "virtual ranks on one GPU, device-to-device copies"});
#else
  out.push_back({"cuda", false, "needs the CUDA toolkit at configure time"});
#endif
#if defined(RESHARD_HAVE_NCCL) && defined(RESHARD_HAVE_MPI)
  out.push_back({"nccl", true, "one process per GPU, ncclSend/ncclRecv"});
#else
  out.push_back({"nccl", false, "needs CUDA, NCCL and MPI at configure time"});
#endif
  return out;
}

}  // namespace reshard::exec
