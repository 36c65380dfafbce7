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

// memcpy of n bytes from a to b, repeated until `seconds` or `most` copies; returns bytes copied per
// second. The buffers are touched once first (page faults are not timed).
double copy_rate(unsigned char* a, unsigned char* b, std::size_t n, double seconds, int most) {
  std::memcpy(b, a, n);
  const double t0 = now();
  int k = 0;
  do {
    a[static_cast<std::size_t>(k) % n] ^= 1;  // each copy reads what the last one did not
    std::memcpy(b, a, n);
    ++k;
  } while (k < most && now() - t0 < seconds);
  return static_cast<double>(n) * k / (now() - t0);
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

// Memory as a run's staging is: pages the process has not used before (a heap that grows),
// zeroed before it is used (exec/backends/src/host_memory.cpp), never moved by a message before. Mapped
// afresh and given back when the holder ends, so each pass gets fresh pages again.
class Fresh {
 public:
  Fresh() = default;
  Fresh(const Fresh&) = delete;
  Fresh& operator=(const Fresh&) = delete;
  ~Fresh() {
    for (const auto& [at, bytes] : held_) munmap(at, bytes);
  }
  // Mapped, not written.
  unsigned char* map(std::size_t bytes, int rank) {
    void* at = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (at == MAP_FAILED) throw ExecError("bench-host: cannot map " + std::to_string(bytes) + " bytes", rank, -1);
    held_.emplace_back(at, bytes);
    return static_cast<unsigned char*>(at);
  }
  // Mapped and zeroed.
  unsigned char* take(std::size_t bytes, int rank) {
    unsigned char* at = map(bytes, rank);
    std::memset(at, 0, bytes);
    return at;
  }

 private:
  std::vector<std::pair<void*, std::size_t>> held_;
};

// Process `from` streams `bytes` to process `to` in chunks of `chunk`, at most `slots` in flight,
// each chunk from and into fresh memory of its own. Returns the seconds it took here.
double stream(int rank, int from, int to, std::int64_t bytes, std::int64_t chunk, int slots, Fresh& fresh) {
  unsigned char* buffer = fresh.take(static_cast<std::size_t>(bytes), rank);
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

// When one process started and finished its part of a test.
struct Interval {
  double start = 0, end = 0;
};

// Every process sends a small message to every other one and receives one from each, polling as
// the host backend does.
Interval all_to_all(int rank, int world, int tag) {
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
  return {t0, now()};
}

// Every process sends `chunk` bytes to every other one and receives as much from each, all at
// once, out of `out` and into `in` (a chunk per process each).
Interval all_to_all_chunks(int rank, int world, std::int64_t chunk, int tag, unsigned char* in, unsigned char* out) {
  const auto n = static_cast<std::size_t>(chunk);
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
  return {t0, now()};
}

// The largest of every process's `mine`, on every process.
double slowest(double mine) {
  double most = 0;
  MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return most;
}

// From the earliest start to the latest end over every process, on every process: the time the
// machine took for what they all did (the processes of one node share MPI_Wtime's clock). With more
// processes than cores one process's own time would be only its turn on a core.
double span(double start, double end) {
  double first = 0, last = 0;
  MPI_Allreduce(&start, &first, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&end, &last, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return last - first;
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

  // One pass of every test. Only the first pass's chunk exchange is each pair's first message.
  auto pass = [&](bool first_pass) {
    model::HostProfile q = p;
    Fresh fresh;
    // Fresh memory, written by every process at once: as a run's staging when a step needs more
    // than the steps before. The same memory then serves the copies below.
    const std::size_t n = static_cast<std::size_t>(o.copy_bytes);
    unsigned char* block = fresh.map(2 * n, rank);
    {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now();
      std::memset(block, 1, 2 * n);
      q.touch_rate_all = model::BytesPerSecond{2.0 * static_cast<double>(n) * world / span(t0, now())};
    }
    // A chunk from every process to every other one, twice (on the first pass the first is each
    // pair's first message of this launch: MPI sets up the pair's transport on it), each out of
    // and into fresh memory of its own; then small messages between every two processes.
    {
      const auto all = static_cast<std::size_t>(o.chunk_bytes) * static_cast<std::size_t>(world);
      unsigned char *in1 = fresh.take(all, rank), *out1 = fresh.take(all, rank), *in2 = fresh.take(all, rank),
                    *out2 = fresh.take(all, rank);
      MPI_Barrier(MPI_COMM_WORLD);
      const Interval a1 = all_to_all_chunks(rank, world, o.chunk_bytes, 1, in1, out1);
      const double first = span(a1.start, a1.end);
      idle_barrier();
      MPI_Barrier(MPI_COMM_WORLD);
      const Interval a2 = all_to_all_chunks(rank, world, o.chunk_bytes, 2, in2, out2);
      const double again = span(a2.start, a2.end);
      constexpr int kRounds = 4;
      idle_barrier();
      MPI_Barrier(MPI_COMM_WORLD);
      Interval rounds{now(), 0};
      for (int i = 0; i < kRounds; ++i) rounds.end = all_to_all(rank, world, 3 + i).end;
      q.message_time = model::Seconds{span(rounds.start, rounds.end) / (kRounds * pairs)};
      // The chunks' bytes: their time beyond what as many small messages take (at least a tenth
      // of it, should the two measurements cross).
      const double bytes_time = std::max(again - pairs * q.message_time.value, 0.1 * again);
      q.transport_rate_all = model::BytesPerSecond{static_cast<double>(o.chunk_bytes) * pairs / bytes_time};
      // A pair's first message: what the first exchange took beyond the second (at least a small
      // message's time).
      if (first_pass) q.connect_time = model::Seconds{std::max((first - again) / pairs, q.message_time.value)};
    }
    // One process copies while the others idle; then every process at once, the same number of times.
    unsigned char *x = block, *y = block + n;
    idle_barrier();
    double one = rank == 0 ? copy_rate(x, y, n, t, 1000) : 0;
    MPI_Bcast(&one, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    q.copy_rate = model::BytesPerSecond{one};
    idle_barrier();
    MPI_Barrier(MPI_COMM_WORLD);
    constexpr int kCopies = 4;
    const double c0 = now();
    for (int i = 0; i < kCopies; ++i) {
      x[static_cast<std::size_t>(i)] ^= 1;
      std::memcpy(y, x, n);
    }
    q.copy_rate_all = model::BytesPerSecond{static_cast<double>(n) * kCopies * world / span(c0, now())};
    // A stream through fresh memory from a to b while the others idle.
    const std::int64_t bytes = std::max<std::int64_t>(o.copy_bytes / 4, o.chunk_bytes);
    idle_barrier();
    double alone = (rank == a || rank == b) ? stream(rank, a, b, bytes, o.chunk_bytes, model::kChainSlots, fresh) : 0;
    MPI_Bcast(&alone, 1, MPI_DOUBLE, b, MPI_COMM_WORLD);
    q.transport_rate = model::BytesPerSecond{static_cast<double>(bytes) / alone};
    // A small message between a and b, the others idling.
    idle_barrier();
    double latency = (rank == a || rank == b) ? ping_pong(rank, a, b, t, 2000) : 0;
    MPI_Bcast(&latency, 1, MPI_DOUBLE, a, MPI_COMM_WORLD);
    q.message_latency = model::Seconds{latency};
    // The barrier.
    idle_barrier();
    MPI_Barrier(MPI_COMM_WORLD);
    constexpr int kBarriers = 20;
    const double b0 = now();
    for (int i = 0; i < kBarriers; ++i) MPI_Barrier(MPI_COMM_WORLD);
    q.barrier = model::Seconds{slowest((now() - b0) / kBarriers)};
    return q;
  };
  std::vector<model::HostProfile> passes;
  for (int i = 0; i < std::max(1, o.passes); ++i) passes.push_back(pass(i == 0));
  // Each constant: its median over the passes (the pair's first message: the first pass's).
  auto median = [&](auto field) {
    std::vector<double> v;
    for (const auto& q : passes) v.push_back((q.*field).value);
    std::sort(v.begin(), v.end());
    return v[(v.size() - 1) / 2];
  };
  p.touch_rate_all.value = median(&model::HostProfile::touch_rate_all);
  p.copy_rate.value = median(&model::HostProfile::copy_rate);
  p.copy_rate_all.value = median(&model::HostProfile::copy_rate_all);
  p.transport_rate.value = median(&model::HostProfile::transport_rate);
  p.transport_rate_all.value = median(&model::HostProfile::transport_rate_all);
  p.message_time.value = median(&model::HostProfile::message_time);
  p.message_latency.value = median(&model::HostProfile::message_latency);
  p.barrier.value = median(&model::HostProfile::barrier);
  p.connect_time = std::max(passes.front().connect_time, p.message_time);
  if (!initialized) MPI_Finalize();
  if (rank != 0) return std::nullopt;
  return p;
}

#endif

}  // namespace reshard::exec
