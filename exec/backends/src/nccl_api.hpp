// NCCL loaded at run time (dlopen), not linked: the reshard binary then runs where NCCL lives
// elsewhere -- PyTorch's `nvidia-nccl-cu13` wheel, a cluster's module -- and where there is none,
// everything but the nccl backend still runs. nccl.h gives the types at build time.
//
// The library is the first of: $RESHARD_NCCL_LIBRARY, libnccl.so.2 and libnccl.so on the loader's
// search path (LD_LIBRARY_PATH). nccl() loads it on first use; ExecError when it is not found or
// lacks a symbol, saying where it looked.
#pragma once

#include <nccl.h>

#include <string>

namespace reshard::exec::detail {

struct NcclApi {
  decltype(&ncclGetUniqueId) GetUniqueId;
  decltype(&ncclCommInitRank) CommInitRank;
  decltype(&ncclCommDestroy) CommDestroy;
  decltype(&ncclCommAbort) CommAbort;
  decltype(&ncclGroupStart) GroupStart;
  decltype(&ncclGroupEnd) GroupEnd;
  decltype(&ncclSend) Send;
  decltype(&ncclRecv) Recv;
  decltype(&ncclGetErrorString) GetErrorString;
  decltype(&ncclGetVersion) GetVersion;
  std::string library;  // the name it was opened by
};

// The loaded library's entry points (loaded once; throws ExecError naming rank when it cannot).
const NcclApi& nccl(int rank = -1);
// The entry points of the library at `path` alone (a test's stand-in for NCCL), loaded anew.
NcclApi load_nccl_library(const std::string& path);

}  // namespace reshard::exec::detail
