// The host backend's micro-benchmark (exec/host_bench.hpp).
#include "reshard/exec/host_bench.hpp"

#include "reshard/exec/executor.hpp"

#ifdef RESHARD_HAVE_MPI
#include <mpi.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "mpi_common.hpp"
#endif

namespace reshard::exec {

#ifndef RESHARD_HAVE_MPI
std::optional<model::HostProfile> bench_host(const HostBenchOptions&) {
  throw ExecError("bench-host measures the host backend, which is not built: MPI was not found at configure time", -1, -1);
}
#else

namespace {

using detail::kIdleSleep;

// Polls `reqs` as the host backend polls its requests: MPI_Testall, and a sleep of kIdleSleep
// when they are not all complete.
void poll(std::vector<MPI_Request>& reqs) {
  while (true) {
    int done = 0;
    MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(kIdleSleep);
  }
}

// Every process waits here for the others, idling as the host backend idles (a process with
// nothing to do in a test waits in this loop while the others measure).
void idle_barrier() {
  std::vector<MPI_Request> r(1);
  MPI_Ibarrier(MPI_COMM_WORLD, &r[0]);
  poll(r);
}

double now() { return MPI_Wtime(); }

// memcpy of `bytes` from one buffer to another, repeated until `seconds` or `most` copies; returns
// bytes copied per second. The buffers are touched once first (page faults are not timed).
double copy_rate(std::vector<unsigned char>& a, std::vector<unsigned char>& b, double seconds, int most) {
  std::memcpy(b.data(), a.data(), a.size());
  const double t0 = now();
  int n = 0;
  do {
    a[static_cast<std::size_t>(n) % a.size()] ^= 1;  // each copy reads what the last one did not
    std::memcpy(b.data(), a.data(), a.size());
    ++n;
  } while (n < most && now() - t0 < seconds);
  return static_cast<double>(a.size()) * n / (now() - t0);
}

// Round trips of a small message between processes `a` and `b`; returns the one-way time. Both
// stop after `seconds` (a decides and tells b with the message) or `most` round trips.
double ping_pong(int rank, int a, int b, double seconds, int most) {
  int msg[2] = {0, 0};  // {trip, stop}
  const int peer = rank == a ? b : a;
  std::vector<MPI_Request> r(1);
  int trips = 0;
  const double t0 = now();
  while (true) {
    if (rank == a) {
      msg[0] = trips;
      msg[1] = trips + 1 >= most || now() - t0 >= seconds;
      MPI_Isend(msg, 2, MPI_INT, peer, 1, MPI_COMM_WORLD, &r[0]);
      poll(r);
      MPI_Irecv(msg, 2, MPI_INT, peer, 2, MPI_COMM_WORLD, &r[0]);
      poll(r);
    } else {
      MPI_Irecv(msg, 2, MPI_INT, peer, 1, MPI_COMM_WORLD, &r[0]);
      poll(r);
      MPI_Isend(msg, 2, MPI_INT, peer, 2, MPI_COMM_WORLD, &r[0]);
      poll(r);
    }
    ++trips;
    if (msg[1]) break;
  }
  return (now() - t0) / (2.0 * trips);
}

// Memory as a run's staging is: allocated and zeroed before it is used (exec/src/host_memory.cpp),
// never moved by a message before. Held until the benchmark ends, so that the heap never hands
// the same memory out twice.
class Fresh {
 public:
  unsigned char* take(std::size_t bytes) {
    held_.emplace_back();
    held_.back().assign(bytes, 0);
    return held_.back().data();
  }

 private:
  std::vector<std::vector<unsigned char>> held_;
};

// Process `from` streams `bytes` to process `to` in chunks of `chunk`, at most `slots` in flight,
// each chunk from and into fresh memory of its own. Returns the seconds it took here.
double stream(int rank, int from, int to, std::int64_t bytes, std::int64_t chunk, int slots, Fresh& fresh) {
  unsigned char* buffer = fresh.take(static_cast<std::size_t>(bytes));
  const int chunks = static_cast<int>((bytes + chunk - 1) / chunk);
  std::vector<MPI_Request> r;
  const double t0 = now();
  for (int k = 0; k < chunks; ++k) {
    const std::int64_t at = k * chunk, n = std::min(chunk, bytes - at);
    r.emplace_back();
    if (rank == from) MPI_Isend(buffer + at, static_cast<int>(n), MPI_BYTE, to, 100 + k, MPI_COMM_WORLD, &r.back());
    else MPI_Irecv(buffer + at, static_cast<int>(n), MPI_BYTE, from, 100 + k, MPI_COMM_WORLD, &r.back());
    if (static_cast<int>(r.size()) == slots || k + 1 == chunks) {
      poll(r);
      r.clear();
    }
  }
  return now() - t0;
}

// Every process sends a small message to every other one and receives one from each, polling as
// the host backend does; returns the seconds it took here.
double all_to_all(int rank, int world, int tag) {
  std::vector<int> in(static_cast<std::size_t>(world)), out(static_cast<std::size_t>(world), rank);
  std::vector<MPI_Request> r;
  const double t0 = now();
  for (int p = 0; p < world; ++p)
    if (p != rank) {
      r.emplace_back();
      MPI_Irecv(&in[static_cast<std::size_t>(p)], 1, MPI_INT, p, tag, MPI_COMM_WORLD, &r.back());
    }
  for (int p = 0; p < world; ++p)
    if (p != rank) {
      r.emplace_back();
      MPI_Isend(&out[static_cast<std::size_t>(p)], 1, MPI_INT, p, tag, MPI_COMM_WORLD, &r.back());
    }
  poll(r);
  return now() - t0;
}

// Every process sends `chunk` bytes to every other one and receives as much from each, all at
// once, out of and into memory allocated and zeroed just before (as a run's staging) that no
// message has used yet; returns the seconds it took here. The memory stays held by `keep`, so that
// the next call gets fresh memory too.
double all_to_all_chunks(int rank, int world, std::int64_t chunk, int tag, Fresh& fresh) {
  const auto n = static_cast<std::size_t>(chunk);
  unsigned char* in = fresh.take(n * static_cast<std::size_t>(world));
  unsigned char* out = fresh.take(n * static_cast<std::size_t>(world));
  std::vector<MPI_Request> r;
  const double t0 = now();
  for (int p = 0; p < world; ++p)
    if (p != rank) {
      r.emplace_back();
      MPI_Irecv(in + n * static_cast<std::size_t>(p), static_cast<int>(chunk), MPI_BYTE, p, tag, MPI_COMM_WORLD, &r.back());
    }
  for (int p = 0; p < world; ++p)
    if (p != rank) {
      r.emplace_back();
      MPI_Isend(out + n * static_cast<std::size_t>(p), static_cast<int>(chunk), MPI_BYTE, p, tag, MPI_COMM_WORLD, &r.back());
    }
  poll(r);
  return now() - t0;
}

// The largest of every process's `mine`, on every process.
double slowest(double mine) {
  double most = 0;
  MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return most;
}

int cores_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string machine_name(int cores) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return model + ", " + std::to_string(cores) + (cores == 1 ? " core" : " cores");
}

}  // namespace

std::optional<model::HostProfile> bench_host(const HostBenchOptions& o) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(nullptr, nullptr);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world < 2) {
    if (!initialized) MPI_Finalize();
    throw ExecError("bench-host measures messages between processes: start it with at least 2 (mpirun -np N, N >= 2; "
                    "N = the processes the runs it predicts use)",
                    rank, -1);
  }
  const double t = o.seconds_per_test;
  const int a = 0, b = world / 2;  // a pair of processes; with one process per core, on different cores
  const double pairs = static_cast<double>(world) * (world - 1);
  model::HostProfile p;
  p.processes = world;
  p.cores = cores_available();
  p.machine = machine_name(p.cores);

  // Fresh memory, written once by every process at once (first, before this process's heap holds
  // memory it could reuse): as a run's staging when a step needs more than the steps before.
  {
    MPI_Barrier(MPI_COMM_WORLD);
    const std::size_t n = static_cast<std::size_t>(o.copy_bytes / 2);
    void* fresh = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fresh == MAP_FAILED) throw ExecError("bench-host: cannot map " + std::to_string(n) + " bytes", rank, -1);
    const double t0 = now();
    std::memset(fresh, 3, n);
    const double mine = now() - t0;
    munmap(fresh, n);
    p.touch_rate_all = model::BytesPerSecond{static_cast<double>(n) * world / slowest(mine)};
  }

  // A chunk from every process to every other one: first as the pair's first message of this
  // launch (MPI sets up the pair's transport on it), then again; both into fresh memory. Per ordered
  // pair, the whole machine's time: the second gives the transport rate, the difference what a
  // pair's first message costs on top.
  Fresh fresh;
  {
    MPI_Barrier(MPI_COMM_WORLD);
    const double first = slowest(all_to_all_chunks(rank, world, o.chunk_bytes, 1, fresh));
    idle_barrier();
    MPI_Barrier(MPI_COMM_WORLD);
    const double again = slowest(all_to_all_chunks(rank, world, o.chunk_bytes, 2, fresh));
    p.transport_rate_all = model::BytesPerSecond{static_cast<double>(o.chunk_bytes) * pairs / again};
    // A first message costs at least what any message does: never less than the small one's below.
    p.connect_time = model::Seconds{std::max(first - again, 0.0) / pairs};
  }
  // Small messages between every two processes, now set up: per message, the whole machine's time.
  constexpr int kRounds = 4;
  idle_barrier();
  double exchange = 0;
  for (int i = 0; i < kRounds; ++i) exchange += slowest(all_to_all(rank, world, 3 + i));
  p.message_time = model::Seconds{exchange / (kRounds * pairs)};
  p.connect_time = std::max(p.connect_time, p.message_time);

  // One process copies; the others idle.
  std::vector<unsigned char> x(static_cast<std::size_t>(o.copy_bytes), 1), y(static_cast<std::size_t>(o.copy_bytes), 2);
  idle_barrier();
  double one = rank == 0 ? copy_rate(x, y, t, 1000) : 0;
  MPI_Bcast(&one, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  p.copy_rate = model::BytesPerSecond{one};
  // Every process copies at once, the same number of times; the sum over the slowest time.
  idle_barrier();
  MPI_Barrier(MPI_COMM_WORLD);
  constexpr int kCopies = 4;
  const double c0 = now();
  for (int i = 0; i < kCopies; ++i) {
    x[static_cast<std::size_t>(i)] ^= 1;
    std::memcpy(y.data(), x.data(), x.size());
  }
  p.copy_rate_all = model::BytesPerSecond{static_cast<double>(o.copy_bytes) * kCopies * world / slowest(now() - c0)};
  std::vector<unsigned char>().swap(x);
  std::vector<unsigned char>().swap(y);

  // A stream through fresh memory from a to b while the others idle.
  const std::int64_t bytes = std::max<std::int64_t>(o.copy_bytes / 4, o.chunk_bytes);
  idle_barrier();
  double alone = (rank == a || rank == b) ? stream(rank, a, b, bytes, o.chunk_bytes, model::kChainSlots, fresh) : 0;
  MPI_Bcast(&alone, 1, MPI_DOUBLE, b, MPI_COMM_WORLD);
  p.transport_rate = model::BytesPerSecond{static_cast<double>(bytes) / alone};
  // A small message between a and b, the others idling.
  idle_barrier();
  double latency = (rank == a || rank == b) ? ping_pong(rank, a, b, t, 2000) : 0;
  MPI_Bcast(&latency, 1, MPI_DOUBLE, a, MPI_COMM_WORLD);
  p.message_latency = model::Seconds{latency};
  // The barrier.
  idle_barrier();
  MPI_Barrier(MPI_COMM_WORLD);
  constexpr int kBarriers = 20;
  const double b0 = now();
  for (int i = 0; i < kBarriers; ++i) MPI_Barrier(MPI_COMM_WORLD);
  p.barrier = model::Seconds{slowest((now() - b0) / kBarriers)};
  if (!initialized) MPI_Finalize();
  if (rank != 0) return std::nullopt;
  return p;
}

#endif

}  // namespace reshard::exec
