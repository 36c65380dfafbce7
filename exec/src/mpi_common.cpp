#include "mpi_common.hpp"

#include <mpi.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace reshard::exec::detail {

MpiWorld mpi_start() {
  MpiWorld w;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    MPI_Init(nullptr, nullptr);
    w.initialized_here = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.world);
  return w;
}

void go_silent(const MpiWorld& w, double timeout_s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(3 * timeout_s));
  throw ExecError("rank " + std::to_string(w.rank) + " went silent (injected fault) and nobody aborted the run", w.rank, -1, true);
}

namespace {

// Polls a request until it completes or `timeout_s` passes.
bool wait_until(MPI_Request& req, double timeout_s) {
  const double deadline = MPI_Wtime() + timeout_s;
  while (true) {
    int flag = 0;
    MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    if (flag) return true;
    if (MPI_Wtime() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Every process tells rank 0 it finished; rank 0 then releases them all. Nobody blocks for longer
// than the timeout on a process that is gone.
void finish_barrier(const MpiWorld& w, double timeout_s) {
  constexpr int kTag = 0x7ffe;  // below the smallest MPI_TAG_UB (32767); the host backend's operations use another communicator
  int go = 1;
  if (w.rank == 0) {
    std::vector<int> done(static_cast<std::size_t>(w.world), 0);
    std::vector<MPI_Request> reqs(static_cast<std::size_t>(w.world), MPI_REQUEST_NULL);
    for (int r = 1; r < w.world; ++r)
      MPI_Irecv(&done[static_cast<std::size_t>(r)], 1, MPI_INT, r, kTag, MPI_COMM_WORLD, &reqs[static_cast<std::size_t>(r)]);
    for (int r = 1; r < w.world; ++r)
      if (!wait_until(reqs[static_cast<std::size_t>(r)], timeout_s))
        throw ExecError("rank 0 waited for rank " + std::to_string(r) + ": it did not finish its operations within " +
                            model::format(model::Seconds{timeout_s}),
                        0, r, true);
  } else {
    int one = 1;
    MPI_Request req;
    MPI_Isend(&one, 1, MPI_INT, 0, kTag, MPI_COMM_WORLD, &req);
    if (!wait_until(req, timeout_s))
      throw ExecError("rank " + std::to_string(w.rank) + " waited for rank 0: it did not collect the results within " +
                          model::format(model::Seconds{timeout_s}),
                      w.rank, 0, true);
  }
  MPI_Request req;
  MPI_Ibcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
  if (!wait_until(req, timeout_s))
    throw ExecError("rank " + std::to_string(w.rank) + " waited for rank 0 to release the run within " +
                        model::format(model::Seconds{timeout_s}),
                    w.rank, 0, true);
}

}  // namespace

RunResult mpi_finish(const RunPlan& plan, const ExecOptions& options, const MpiWorld& w, LocalOutcome& local) {
  // Twice the timeout: a process still inside its operations times out first and names its peer.
  finish_barrier(w, 2 * options.timeout_s);
  const int n = static_cast<int>(local.start.size());
  RunResult res;
  res.rank = w.rank;
  res.world = w.world;
  res.reporter = w.rank == 0;
  res.measurement = new_measurement(plan, options, w.world);
  std::vector<double> start(static_cast<std::size_t>(n), -1), end(static_cast<std::size_t>(n), -1);
  MPI_Reduce(local.start.data(), start.data(), n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(local.end.data(), end.data(), n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  long long bytes = 0, mine = local.bytes_verified;
  MPI_Reduce(&mine, &bytes, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  double elapsed = 0;
  MPI_Reduce(&local.elapsed, &elapsed, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  constexpr int kMessage = 1024;
  char message[kMessage] = {};
  std::strncpy(message, local.error.c_str(), kMessage - 1);
  std::vector<char> all(w.rank == 0 ? static_cast<std::size_t>(kMessage) * static_cast<std::size_t>(w.world) : 1);
  MPI_Gather(message, kMessage, MPI_CHAR, all.data(), kMessage, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (w.initialized_here) MPI_Finalize();
  if (w.rank != 0) return res;
  std::string first;
  int failing = 0;
  for (int r = 0; r < w.world; ++r) {
    const char* m = all.data() + static_cast<std::size_t>(r) * kMessage;
    if (m[0] == 0) continue;
    if (failing++ == 0) first = m;
  }
  if (failing)
    throw ExecError("verification failed: " + first +
                        (failing > 1 ? " (and " + std::to_string(failing - 1) + " more ranks found wrong bytes)" : ""),
                    0, -1);
  auto& m = res.measurement;
  for (int i = 0; i < n; ++i) m.ops[static_cast<std::size_t>(i)] = {start[static_cast<std::size_t>(i)], end[static_cast<std::size_t>(i)]};
  m.bytes_verified = bytes;
  m.elapsed_s = elapsed;
  m.verified = true;
  return res;
}

}  // namespace reshard::exec::detail
