#include "nccl_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "reshard/exec/executor.hpp"

namespace reshard::exec::detail {

namespace {

// (Not named `bind`: with a std::string argument, argument-dependent lookup finds std::bind, a
// better match, which binds nothing -- every entry point stayed null.)
template <class F>
void load_symbol(void* lib, const char* name, F& f, const std::string& path) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) throw ExecError("the NCCL library " + path + " has no " + name + " (NCCL 2.19 or newer is needed)", -1, -1);
}

struct Loaded {
  NcclApi api;
  std::string path, error;
};

// The first library of `names` that opens, with its entry points.
Loaded load(std::initializer_list<const char*> names) {
  Loaded l;
  std::string tried;
  void* lib = nullptr;
  for (const char* name : names) {
    if (!name || !*name) continue;
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      l.path = name;
      l.api.library = name;
      break;
    }
    tried += std::string(tried.empty() ? "" : "; ") + dlerror();
  }
  if (!lib) {
    l.error = "the nccl backend needs the NCCL library, which was not found (" + tried +
              "): put its folder on LD_LIBRARY_PATH (PyTorch's: python3 -c \"import nvidia.nccl, os; "
              "print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))\") or name it in RESHARD_NCCL_LIBRARY";
    return l;
  }
  try {
    load_symbol(lib, "ncclGetUniqueId", l.api.GetUniqueId, l.path);
    load_symbol(lib, "ncclCommInitRank", l.api.CommInitRank, l.path);
    load_symbol(lib, "ncclCommDestroy", l.api.CommDestroy, l.path);
    load_symbol(lib, "ncclCommAbort", l.api.CommAbort, l.path);
    load_symbol(lib, "ncclGroupStart", l.api.GroupStart, l.path);
    load_symbol(lib, "ncclGroupEnd", l.api.GroupEnd, l.path);
    load_symbol(lib, "ncclSend", l.api.Send, l.path);
    load_symbol(lib, "ncclRecv", l.api.Recv, l.path);
    load_symbol(lib, "ncclGetErrorString", l.api.GetErrorString, l.path);
    load_symbol(lib, "ncclGetVersion", l.api.GetVersion, l.path);
  } catch (const ExecError& e) {
    l.error = e.what();
  }
  return l;
}

}  // namespace

const NcclApi& nccl(int rank) {
  // Loaded once, by a function-local static's initializer.
  static const Loaded loaded = load({std::getenv("RESHARD_NCCL_LIBRARY"), "libnccl.so.2", "libnccl.so"});
  if (!loaded.error.empty()) throw ExecError(loaded.error, rank, -1);
  if (!loaded.api.GetUniqueId || !loaded.api.CommInitRank || !loaded.api.Send || !loaded.api.Recv)
    throw ExecError("the NCCL library " + loaded.path + " was opened but its entry points were not loaded", rank, -1);
  return loaded.api;
}

NcclApi load_nccl_library(const std::string& path) {
  Loaded l = load({path.c_str()});
  if (!l.error.empty()) throw ExecError(l.error, -1, -1);
  return l.api;
}

}  // namespace reshard::exec::detail
