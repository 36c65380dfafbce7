#include "mpi_common.hpp"

#include <mpi.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

namespace reshard::exec::detail {

MpiHold::MpiHold() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    MPI_Init(nullptr, nullptr);
    initialized_here = true;
  }
}

MpiHold::~MpiHold() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (initialized_here && !finalized) MPI_Finalize();
}

namespace {

// The launcher's value of the first of `vars` it sets; -1 when none.
int launcher_int(std::initializer_list<const char*> vars) {
  for (const char* var : vars)
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return -1;
}

// This process's rank from the launcher's environment (before MPI_Init); -1 when unknown.
int launcher_rank() { return launcher_int({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}); }

}  // namespace

// Arrival marks: a process stopped before MPI_Init leaves the others blocked inside it, where MPI
// cannot say who is missing. So before MPI_Init every process leaves a mark, an empty file
// TMPDIR/reshard-setup-JOB/RANK (JOB: the launcher's job id), and a watchdog that fires inside
// MPI_Init reads the marks of its node: with every process on one node (the launcher's local size
// equals its world size) the ranks without a mark are exactly the missing ones; across nodes it
// names how many of this node's processes never arrived. Each process removes its mark once setup
// is past MPI_Init (rank 0 released the run), the last one the folder; a watchdog that fires, or
// rank 0 naming a process that never arrived, removes the folder. Without a job id (not launched
// by mpirun, srun or a PMIx launcher) there are no marks.
class ArrivalMarks {
 public:
  ArrivalMarks() {
    std::string job;
    for (const char* var : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID"})
      if (const char* v = std::getenv(var); v && *v) {
        job = v;
        break;
      }
    rank_ = launcher_rank();
    world_ = launcher_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
    local_size_ = launcher_int({"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"});
    if (job.empty() || rank_ < 0) return;
    for (char& c : job)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
    std::error_code ec;
    dir_ = std::filesystem::temp_directory_path(ec) / ("reshard-setup-" + job);
    std::filesystem::create_directories(dir_, ec);
    std::ofstream(dir_ / std::to_string(rank_));
  }
  // What the marks of this node say about the processes that never reached MPI_Init ("" when they
  // cannot say).
  std::string missing() const {
    if (dir_.empty() || world_ <= 0) return "";
    std::set<int> seen;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) seen.insert(std::atoi(e.path().filename().c_str()));
    if (local_size_ == world_) {
      std::string names;
      int count = 0;
      for (int r = 0; r < world_; ++r)
        if (!seen.count(r) && ++count <= 8) names += (names.empty() ? "" : ", ") + std::to_string(r);
      if (count == 0) return "";
      return (count == 1 ? "rank " : "ranks ") + names + (count > 8 ? " and " + std::to_string(count - 8) + " more" : "") +
             " never reached MPI_Init (no arrival mark on this node)";
    }
    if (local_size_ > static_cast<int>(seen.size()))
      return std::to_string(local_size_ - static_cast<int>(seen.size())) + " of this node's " + std::to_string(local_size_) +
             " processes never reached MPI_Init (no arrival mark)";
    return "";
  }
  // The run ends here (a watchdog fired): the folder and every mark in it go.
  void discard() const {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  // Past MPI_Init: this process's mark is no longer needed.
  void clear() {
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::remove(dir_ / std::to_string(rank_), ec);
    std::filesystem::remove(dir_, ec);  // only once empty: the last process removes it
    dir_.clear();
  }

 private:
  std::filesystem::path dir_;
  int rank_ = -1, world_ = -1, local_size_ = -1;
};

class SetupWatchdog {
 public:
  // `marks`: read when the watchdog fires inside MPI_Init; outlives the watchdog.
  SetupWatchdog(int rank, double timeout_s, const ArrivalMarks& marks)
      : rank_(rank), timeout_s_(timeout_s), marks_(marks), start_(std::chrono::steady_clock::now()) {
    const double delay = timeout_s + (rank == 0 ? 1.5 : rank == 1 ? 3.0 : 4.5);
    thread_ = std::thread([this, delay] {
      std::unique_lock lock(mutex_);
      const auto deadline = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(delay));
      while (true) {
        if (cv_.wait_until(lock, deadline, [this] { return done_; })) return;
        cv_.wait(lock, [this] { return done_ || !paused_; });  // a bounded, non-blocking check answers itself
        if (done_) return;
        if (std::chrono::steady_clock::now() >= deadline) break;
      }
      const std::string who = std::strcmp(stage_, "MPI_Init") == 0 ? marks_.missing() : "";
      marks_.discard();
      std::fprintf(stderr, "reshard: error: rank %d: the run's setup (%s) did not finish within %s: %s\n", rank_, stage_,
                   model::format(model::Seconds{timeout_s_}).c_str(), who.empty() ? "a process never arrived" : who.c_str());
      std::fflush(stderr);
      std::_Exit(3);
    });
  }
  ~SetupWatchdog() { stop(); }
  // Seconds of the timeout left since the watchdog started (setup began).
  double remaining() const {
    return timeout_s_ - std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  // `paused`: what follows cannot block and reports a missing process itself.
  void stage(const char* what, bool paused = false) {
    {
      std::lock_guard lock(mutex_);
      stage_ = what;
      paused_ = paused;
    }
    cv_.notify_all();
  }
  void stop() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  int rank_;
  double timeout_s_;
  const ArrivalMarks& marks_;
  std::chrono::steady_clock::time_point start_;
  const char* stage_ = "MPI_Init";
  bool done_ = false;
  bool paused_ = false;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::thread thread_;
};

namespace {

bool poll_until(MPI_Request& req, double deadline) {
  while (true) {
    int flag = 0;
    MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    if (flag) return true;
    if (deadline > 0 && MPI_Wtime() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

MpiWorld mpi_start(const ExecOptions& options) {
  MpiWorld w;
  int initialized = 0;
  MPI_Initialized(&initialized);
  const int rank = std::max(launcher_rank(), 0);
  // Test-only: a process that never arrives. When the launcher continues it (SIGCONT before the
  // kill that ends the run), it leaves at once rather than leave an arrival mark behind.
  for (const auto& f : options.faults)
    if (f.kind == Fault::Kind::StopBeforeInit && f.target == rank && !initialized) {
      std::raise(SIGSTOP);
      std::_Exit(3);
    }
  static ArrivalMarks marks;  // process-wide: the watchdog thread may read it until the process ends
  w.watchdog = std::make_shared<SetupWatchdog>(rank, options.timeout_s, marks);
  if (!initialized) {
    MPI_Init(nullptr, nullptr);
    w.initialized_here = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.world);
  for (const auto& f : options.faults)
    if (f.kind == Fault::Kind::Stop && f.target == w.rank) std::raise(SIGSTOP);  // test-only: a stopped process
  // Arrival: every process tells rank 0 it is here; rank 0 waits at most the timeout for each, then
  // releases them all. The others wait for the release under the watchdog alone.
  w.watchdog->stage(w.rank == 0 ? "waiting for every process to arrive" : "waiting for rank 0, which waits for every process",
                    w.rank == 0);
  constexpr int kTag = 0x7ffd;  // the finish uses 0x7ffe on MPI_COMM_WORLD; operations use their own communicator
  int here = 1;
  if (w.rank == 0) {
    std::vector<int> arrived(static_cast<std::size_t>(w.world), 0);
    std::vector<MPI_Request> reqs(static_cast<std::size_t>(w.world), MPI_REQUEST_NULL);
    for (int r = 1; r < w.world; ++r)
      MPI_Irecv(&arrived[static_cast<std::size_t>(r)], 1, MPI_INT, r, kTag, MPI_COMM_WORLD, &reqs[static_cast<std::size_t>(r)]);
    // At least 1 s, so that processes that did arrive are seen even when MPI_Init took the whole timeout.
    const double deadline = MPI_Wtime() + std::max(w.watchdog->remaining(), 1.0);
    for (int r = 1; r < w.world; ++r)
      if (!poll_until(reqs[static_cast<std::size_t>(r)], deadline)) {
        w.watchdog->stage("reporting a missing process");
        marks.discard();  // the run ends here
        throw ExecError("rank 0 waited for rank " + std::to_string(r) + ": it never arrived at the run's setup within " +
                            model::format(model::Seconds{options.timeout_s}),
                        0, r, true);
      }
  } else {
    MPI_Request req;
    MPI_Isend(&here, 1, MPI_INT, 0, kTag, MPI_COMM_WORLD, &req);
    poll_until(req, 0);
  }
  MPI_Request go;
  MPI_Ibcast(&here, 1, MPI_INT, 0, MPI_COMM_WORLD, &go);
  poll_until(go, 0);
  marks.clear();  // every process is past MPI_Init
  w.watchdog->stage("setup collectives");
  return w;
}

void setup_done(MpiWorld& w) {
  if (w.watchdog) w.watchdog->stop();
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
  const int gpus = static_cast<int>(plan.gpus.size());
  std::vector<long long> staging(plan.gpus.size(), -1), mine_staging(plan.gpus.size(), -1);
  for (std::size_t i = 0; i < local.staging.size() && i < mine_staging.size(); ++i) mine_staging[i] = local.staging[i];
  MPI_Reduce(mine_staging.data(), staging.data(), gpus, MPI_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
  constexpr int kMessage = 1024;
  char message[kMessage] = {};
  std::strncpy(message, local.error.c_str(), kMessage - 1);
  std::vector<char> all(w.rank == 0 ? static_cast<std::size_t>(kMessage) * static_cast<std::size_t>(w.world) : 1);
  MPI_Gather(message, kMessage, MPI_CHAR, all.data(), kMessage, MPI_CHAR, 0, MPI_COMM_WORLD);
  // Digests: every process's records, as bytes, to rank 0.
  std::vector<PieceDigest> digests;
  if (options.verification == Verification::Digest) {
    int mine_bytes = static_cast<int>(local.digests.size() * sizeof(PieceDigest));
    std::vector<int> counts(static_cast<std::size_t>(w.world), 0), displs(static_cast<std::size_t>(w.world), 0);
    MPI_Gather(&mine_bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::size_t total = 0;
    for (int r = 0; r < w.world; ++r) {
      displs[static_cast<std::size_t>(r)] = static_cast<int>(total);
      total += static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]);
    }
    if (w.rank == 0) digests.resize(total / sizeof(PieceDigest));
    MPI_Gatherv(local.digests.data(), mine_bytes, MPI_BYTE, digests.data(), counts.data(), displs.data(), MPI_BYTE, 0,
                MPI_COMM_WORLD);
  }
  if (w.initialized_here) MPI_Finalize();
  if (w.rank != 0) return res;
  LocalOutcome merged;
  merged.start = std::move(start);
  merged.end = std::move(end);
  merged.bytes_verified = bytes;
  merged.host_calls = local.host_calls;  // process 0's
  merged.elapsed = elapsed;
  merged.staging.assign(staging.begin(), staging.end());
  std::vector<std::string> errors;
  for (int r = 0; r < w.world; ++r) errors.emplace_back(all.data() + static_cast<std::size_t>(r) * kMessage);
  return reporter_result(plan, options, w.world, merged, errors, std::move(digests));
}

}  // namespace reshard::exec::detail
