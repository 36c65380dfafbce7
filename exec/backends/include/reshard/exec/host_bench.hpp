// The host backend's micro-benchmark (`mpirun -np N reshard bench-host -o host.yaml`): measures,
// on this machine and with the MPI transport and the idle loop the host backend uses
// (exec/backends/src/host_backend.cpp: MPI_Isend/MPI_Irecv polled by MPI_Testsome, a 20 us sleep when
// nothing moved), the constants of the host cost model (model/host_cost.hpp). Nothing in it is
// fitted to a run of a schedule.
//
// Every test runs `passes` times (each constant the median) with the N processes of the launch alive; "all" means every process at once,
// and its figure is the sum of their work over the slowest one's time (what the machine does with
// its cores shared by N processes). In the order they run:
//   touch_rate_all      every process writes memory it has never used (fresh pages): bytes / s
//   connect_time        a 512 KiB chunk from every process to every other one, as each pair's first
//                       message of the launch, then again: per ordered pair, the difference
//   message_time        small messages from every process to every other one: per message
//   transport_rate_all  the second chunk exchange, out of and into staging no message has used
//                       before (allocated and zeroed just before, as a run's): the chunks' bytes
//                       over its time beyond as many small messages' (message_time each)
//   copy_rate           one process copies 8 MiB (memcpy) while the others idle: bytes / s
//   copy_rate_all       every process copies at once: bytes / s
//   transport_rate      chunks streamed from one process to another through 8 slots, fresh
//                       memory, the others idling: bytes / s
//   message_latency     one-way time of a small message between two processes, the others
//                       idling (a ping-pong's round trip / 2)
//   barrier             MPI_Barrier over the N processes
//   cores               the CPUs this process may run on (sched_getaffinity)
#pragma once

#include <cstdint>
#include <optional>

#include "reshard/model/defaults.hpp"
#include "reshard/model/host_cost.hpp"

namespace reshard::exec {

struct HostBenchOptions {
  std::int64_t copy_bytes = 8 << 20;    // the buffer one process copies
  std::int64_t chunk_bytes = model::kDefaultChunk.value;  // a stream's chunk (the strategies' default)
  double seconds_per_test = 0.2;        // the timed loops of one process stop after this (or their count)
  int passes = 1;                       // every test this many times, each constant the median (the
                                        // pair's first message: the first pass's)
};

// Collective over every process of the MPI launch (N >= 2; MPI is initialised and finalised here
// when not already). Returns the profile on process 0, nullopt on the others. Throws ExecError
// without MPI or with fewer than two processes.
std::optional<model::HostProfile> bench_host(const HostBenchOptions& options = {});

}  // namespace reshard::exec
