// The pipelined chain (model::Chain, schedule.hpp) on a topology: the one statement of a chain op's
// semantics (route, rate, time, order) and of its cost. The estimate (cost.hpp) and the simulator
// (sim/schedule_sim.hpp) compute the cost with the functions below; the validator (validate,
// schedule.hpp) and the executors (exec/program.hpp) call chain_depths only, to check the shape
// and place each GPU in the tree. Every other document links here instead of restating it.
//
// Route. Hop (a, b) follows Topology::route(a, b). Where that route has k equal-cost paths the hop
// is pinned to one of them: a hop is one connection, and ECMP places a connection on one path
// rather than spreading its bytes. The strategies pin each hop to the path with the least load so
// far (ChainHop::path); a hop left at -1 takes path (a + b) mod k. The chain then loads link l with w_l
// times its rate, w_l being the number of hops whose path crosses l (an ingress GPU's NVLink port
// carries every fan-out hop leaving it). On a generated fabric whose leaf-spine links are thinner
// than a NIC (fewer nodes per leaf than spines' share, e.g. 2 nodes over 4 spines), a pinned
// cross-rail hop is limited by one such link.
//
// Rate. Every hop moves the same bytes at the same rate r (a chunk is forwarded as it arrives, so
// a hop runs as fast as its slowest upstream hop and no faster than its own links allow). Alone
// on the fabric, with link capacities C_l,
//     r = min( min over l of C_l / w_l ,  r_slots ),   r_slots = (S - 1) c / max hop latency,
// S = Schedule::slots (the ring of model/memory.hpp; NCCL's 8 by default). A hop with S chunks in
// flight and per-chunk latency ℓ sends S chunks every ℓ + c / r, so it keeps the link busy while
// S c / (ℓ + c / r) >= r, that is r <= (S - 1) c / ℓ: the latency of a chunk is overlapped with
// the others' transfer and costs nothing until chunks are that small (256 KiB over a 3 us network
// hop with S = 8: r_slots = 600 GB/s; with S = 2, 86 GB/s).
//
// Time. With B the part's bytes, c' = min(c, B), H the depth and m the memory copy rate
// (CostParams::memory_copy_rate),
//     T = per_op + B / r  +  L + (H - 1) c' / r  +  2 c' / m,
// L the latency of the slowest root-to-leaf path (the sum of its hops' route latencies): after
// per_op the root sends for B / r ("sent"); its last chunk then needs L to reach the farthest
// leaf, plus H - 1 chunk times (the pipeline fill), plus the copies that do not overlap with the
// wire: the root packs its first chunk into its ring before it can send it, the farthest leaf
// unpacks its last one after it has arrived (copy_fill). The fill is taken at the rate alone: the
// chunks still in flight when the root is done are one per hop, and links the chain shares carry
// the other chains' chunks in between (a ring all-gather's n chains drain in n - 2 chunk times,
// not n (n - 2)). Order: ops on one chain run in op-id order, each starting once released and
// once the previous one has been sent (its chunks follow the previous op's through the chain, as
// NCCL runs a communicator's collectives), so a stream of ops on one chain pays one fill.
// On a shared fabric the simulator runs the data phase as one flow over every link l, weighted
// w_l, at the rate max-min fairness gives it, followed by a tail of L + fill / r + copy fill
// without links (sim/schedule_sim.hpp).
//
// A plain transfer streams the same way, as a chain of one hop (H = 1: no pipeline fill) in
// chunks of the schedule's params.chunk: T = per_op + L + B / r + 2 c' / m, its r also at most
// r_slots over its route's latency. Unlike a chain hop it is not pinned: its bytes are split evenly
// over the route's k equal-cost paths (1/k on each), so r = min over its links of C_l / share_l.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "reshard/model/schedule.hpp"
#include "reshard/model/topology.hpp"

namespace reshard::model {

// The depth of each hop's `to` (hops from the root), after checking the shape written on Chain:
// hops[0].from is `root`, every `from` is the root or an earlier `to`, every `to` appears once
// and is not the root, no hop stays on one GPU. Throws ScheduleError prefixed with `where`.
std::vector<std::int32_t> chain_depths(const Chain& chain, GpuId root, const std::string& where);

struct ChainRoute {
  std::vector<LinkId> links;          // sorted, distinct
  std::vector<std::int32_t> weights;  // per entry of `links`: hops crossing it (w_l)
  std::int32_t depth = 0;             // H
  Seconds latency;                    // L: the slowest root-to-leaf path
  Seconds hop_latency;                // the slowest single hop (what bounds r_slots)
  std::int32_t network_hops = 0;      // hops whose route crosses the network
  std::int32_t local_hops = 0;        // hops inside an NVLink domain
};

// The links, weights and latencies of `chain` rooted at `root`. A hop's latency is its route's, or
// min_hop_latency[kind of its route] when that is larger (a pipelined protocol's per-hop cost,
// CostParams::chain_hop_latency). Throws ScheduleError (prefixed with `where`) for a malformed
// chain, a GPU outside the topology or a hop without a route.
ChainRoute chain_route(const Chain& chain, GpuId root, const Topology& topo, const std::string& where,
                       const std::array<Seconds, kLinkKinds>& min_hop_latency = {});

// The pipeline fill in bytes, (H - 1) min(chunk, part_bytes): the fill takes fill / r.
Bytes chain_fill(const Chain& chain, std::int32_t depth, Bytes part_bytes);

// r_slots = (S - 1) c / hop_latency of a stream in chunks of c through `slots` slots (infinite when
// the hop has no latency).
BytesPerSecond slot_rate(Bytes chunk, std::int32_t slots, Seconds hop_latency);

// 2 min(chunk, part) / copy_rate: the pack of the first chunk and the unpack of the last, the
// copies a stream does not overlap with its transfer.
Seconds copy_fill(Bytes chunk, Bytes part_bytes, BytesPerSecond copy_rate);

}  // namespace reshard::model
