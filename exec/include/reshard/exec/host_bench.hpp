// The host backend's micro-benchmark (`mpirun -np N reshard bench-host -o host.yaml`): measures,
// on this machine and with the MPI transport and the idle loop the host backend uses
// (exec/src/host_backend.cpp: MPI_Isend/MPI_Irecv polled by MPI_Testsome, a 20 us sleep when
// nothing moved), the constants of the host cost model (model/host_cost.hpp). Nothing in it is
// fitted to a run of a schedule.
//
//   copy_rate        one process copies a buffer (memcpy) while the others idle: bytes copied / s
//   copy_rate_all    all N processes copy at once: the sum of their bytes / the slowest one's time
//   message_latency  one-way time of a small message between two processes polling as the host
//                    backend does, while the other processes idle in the same loop (a ping-pong:
//                    its round-trip time / 2)
//   transport_rate   chunks (512 KiB) streamed from one process to another through 8 slots, the
//                    others idling: bytes / s of MPI's own copy between processes
//   barrier          MPI_Barrier over the N processes (the barrier before a run's clock starts)
//   cores            the CPUs this process may run on (sched_getaffinity)
#pragma once

#include <cstdint>
#include <optional>

#include "reshard/model/host_cost.hpp"

namespace reshard::exec {

struct HostBenchOptions {
  std::int64_t copy_bytes = 32 << 20;   // the buffer one process copies
  std::int64_t chunk_bytes = 512 << 10; // a stream's chunk (the strategies' default)
  double seconds_per_test = 0.4;        // each timed loop stops after this (or its count of repeats)
};

// Collective over every process of the MPI launch (N >= 2; MPI is initialised and finalised here
// when not already). Returns the profile on process 0, nullopt on the others. Throws ExecError
// without MPI or with fewer than two processes.
std::optional<model::HostProfile> bench_host(const HostBenchOptions& options = {});

}  // namespace reshard::exec
