// NCCL's ring collectives as schedules of chain ops, so that the estimate and the simulator can be
// checked against published nccl-tests measurements (docs/validation.md).
//
// Rings. NCCL runs a collective over C channels, each a ring through every rank. A ring visits the
// NVLink domains in order; channel c enters domain k at its GPU of index (c - k) mod m (m GPUs of
// the domain in the list, sorted) and walks the domain from there, so consecutive domains are
// joined on one rail and the C rings leave every domain through different NICs (the ring order of
// the `gather_broadcast` strategy).
//
// Broadcast of S bytes from gpus[0]: channel c carries part c of C (S / C bytes) along its ring,
// rotated to start at the root: one chain op of n - 1 hops per channel.
//
// All-gather of S bytes (S / n from each of the n ranks, as nccl-tests counts it): channel c of
// rank g carries part c of g's S / n bytes along the ring from g: n chain ops of n - 1 hops per
// channel, all released at once (every ring link carries n - 1 of them, the ring fully busy).
//
// nccl-tests reports algbw = S / t and busbw = algbw x factor: 1 for broadcast, (n - 1) / n for
// all-gather (nccl-tests doc/PERFORMANCE.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reshard/model/schedule.hpp"
#include "reshard/model/topology.hpp"

namespace reshard::model {

enum class Collective : std::uint8_t { Broadcast, AllGather };
const char* to_string(Collective c);
// "broadcast" or "all_gather"; throws PlanError naming the choices otherwise.
Collective parse_collective(const std::string& name);

struct CollectiveSpec {
  Collective kind = Collective::Broadcast;
  std::vector<GpuId> gpus;  // the ranks, in rank order; gpus[0] is the broadcast root
  Bytes size;               // S as nccl-tests counts it
  std::int32_t channels = 8;
  Bytes chunk = kDefaultChunk;
};

// The schedule (no pieces: each op's buffer is bytes only). Throws PlanError for fewer than two
// ranks, a repeated or unknown GPU, a size or chunk <= 0, or channels < 1.
Schedule collective_schedule(const CollectiveSpec& spec, const Topology& topo);

// busbw / algbw for the collective on n ranks.
double bus_bandwidth_factor(Collective c, std::int32_t ranks);

}  // namespace reshard::model
