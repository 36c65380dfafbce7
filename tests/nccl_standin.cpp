// A stand-in for NCCL's library, for the tests of the nccl backend without a GPU
// (test_exec_engine.cpp): the entry points the backend loads (exec/backends/src/nccl_api.hpp), for
// one process at world size 1 on host memory. It records every call and moves the bytes of each
// group's sends to itself into its receives, matched in issue order as NCCL matches a pair's
// point-to-point calls; a group whose sends and receives do not match one for one (count, bytes)
// fails with ncclInvalidUsage and says why (reshard_standin_error).
#include <nccl.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

struct Call {
  bool send;
  const void* from;
  void* to;
  std::size_t bytes;
};

struct Record {
  long long inits = 0, destroys = 0, aborts = 0, groups = 0, sends = 0, receives = 0, bytes = 0, comms_alive = 0;
  int depth = 0;
  std::vector<Call> group;
  std::string error;
} state;

int comm_tag = 0;  // a communicator is a pointer to this

ncclResult_t fail(const std::string& why) {
  if (state.error.empty()) state.error = why;
  return ncclInvalidUsage;
}

ncclResult_t flush() {
  std::vector<const Call*> sends, receives;
  for (const Call& c : state.group) (c.send ? sends : receives).push_back(&c);
  state.group.clear();
  if (sends.size() != receives.size())
    return fail("a group of " + std::to_string(sends.size()) + " sends and " + std::to_string(receives.size()) + " receives");
  for (std::size_t i = 0; i < sends.size(); ++i) {
    if (sends[i]->bytes != receives[i]->bytes)
      return fail("send " + std::to_string(i) + " of a group moves " + std::to_string(sends[i]->bytes) + " bytes, its receive " +
                  std::to_string(receives[i]->bytes));
    if (sends[i]->bytes) std::memmove(receives[i]->to, sends[i]->from, sends[i]->bytes);
    state.bytes += static_cast<long long>(sends[i]->bytes);
  }
  return ncclSuccess;
}

ncclResult_t p2p(bool send, const void* from, void* to, std::size_t count, ncclDataType_t type, int peer, ncclComm_t comm) {
  if (comm != reinterpret_cast<ncclComm_t>(&comm_tag)) return fail("a call on a communicator the stand-in did not make");
  if (type != ncclUint8) return fail("a type other than ncclUint8");
  if (peer != 0) return fail("a peer other than rank 0 at world size 1");
  ++(send ? state.sends : state.receives);
  state.group.push_back({send, from, to, count});
  return state.depth > 0 ? ncclSuccess : flush();
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  *version = 22809;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  std::memcpy(id->internal, "stand-in", 8);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (nranks != 1 || rank != 0) return fail("a world other than one rank");
  if (std::memcmp(id.internal, "stand-in", 8) != 0) return fail("an id the stand-in did not make");
  ++state.inits;
  ++state.comms_alive;
  *comm = reinterpret_cast<ncclComm_t>(&comm_tag);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t) {
  ++state.destroys;
  --state.comms_alive;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t) {
  ++state.aborts;
  --state.comms_alive;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++state.depth;
  ++state.groups;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (state.depth == 0) return fail("ncclGroupEnd without ncclGroupStart");
  return --state.depth == 0 ? flush() : ncclSuccess;
}

ncclResult_t ncclSend(const void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t) {
  return p2p(true, buf, nullptr, count, type, peer, comm);
}

ncclResult_t ncclRecv(void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t) {
  return p2p(false, nullptr, buf, count, type, peer, comm);
}

const char* ncclGetErrorString(ncclResult_t) { return state.error.empty() ? "stand-in error" : state.error.c_str(); }

// What the stand-in saw: inits, destroys, aborts, groups, sends, receives, bytes moved, communicators alive.
void reshard_standin_counts(long long* out) {
  const long long v[] = {state.inits, state.destroys, state.aborts, state.groups, state.sends, state.receives, state.bytes, state.comms_alive};
  std::memcpy(out, v, sizeof v);
}
const char* reshard_standin_error() { return state.error.c_str(); }
void reshard_standin_reset() { state = Record{}; }

}  // extern "C"
