// The analytic cost model (DESIGN.md §8).
//
// estimate() is a pure function of a schedule, the topology and the cost parameters:
//
//   load(l)      = sum over operations o of bytes(o) * share(o, l)     (R * b: the sparse routing
//                  matrix R, links x operations, share = 1/k on each of k ECMP paths, times the byte
//                  vector b; Eigen)
//   T_bandwidth  = max over links l of load(l) / (bandwidth(l) * efficiency(kind(l)))
//   t(o)         = latency(route(o)) + per_op + bytes(o) / min over l on o's route of
//                  (bandwidth(l) * efficiency(kind(l)))                       (o alone on its route)
//   T_critical   = longest path through the DAG with these t(o)    (pipeline fill and dependencies);
//                  a broadcast ring hop (a Broadcast op waiting only for the previous hop of the
//                  same part) cuts through: it starts when the previous hop's first ring_chunk has
//                  arrived and ends no earlier than one chunk after the previous hop ends
//   T_latency    = longest path through the DAG with t(o) = latency(route(o)) + per_op only
//   T_pipeline   = T_bandwidth * (C + H - 1) / C + T_latency  for a schedule whose parts travel
//                  chains of H network hops in C parts: while the links are shared by every chain,
//                  each hop of a part takes about T_bandwidth / C, and the last part leaves the first
//                  hop only after C of them, then crosses H - 1 more (pipeline fill); and each step
//                  of a dependent sequence pays its latency and per-operation cost while its bytes
//                  share the links with everything else, so those add up rather than hide (this is
//                  what dominates schedules of kilobyte operations)
//   estimate     = max(T_pipeline, T_critical) + overheads
//   overheads    = per_tensor * tensors moved by reshard operations
//                + per_broadcast_tensor * tensors moved by gather/broadcast operations
//                + per_bucket * broadcast buckets + per_stage * broadcasting source stages
//
// The two terms bound the makespan from below in a fluid model with these capacities; the max of
// them is exact for a single bottleneck with full overlap and is what the simulator refines.
#pragma once

#include <filesystem>
#include <string>

#include "reshard/model/schedule.hpp"

namespace reshard::model {

struct CostParams {
  // Hardware: achievable fraction of line rate and per-hop latency by link kind, index LinkKind.
  double efficiency[4] = {0.82, 0.85, 0.85, 0.94};
  // Implementation profile.
  std::string profile = "reshard";
  // Per transfer operation: a small-message send/recv between two GPUs over NVLink takes about 3 us
  // (hardware.md, measured), of which the NVLink route accounts for about 0.6 us.
  Seconds per_op{2.4e-6};
  Seconds per_tensor{0};         // per tensor moved by reshard operations (framework bookkeeping)
  Seconds per_broadcast_tensor{0};  // per tensor moved by the gather/broadcast path
  Seconds per_bucket{0};         // per broadcast bucket (packing, launch, synchronisation)
  Seconds per_stage{0};          // per source pipeline stage that broadcasts (group setup, sequencing)
  BytesPerSecond memory_copy_rate{2.15e12};  // local GPU copy payload: H200 D2D ~4.3 TB/s read+write (hardware.md) / 2
  // A ring broadcast forwards in chunks as they arrive (NCCL: a 4 MiB buffer in 8 steps, 512 KiB),
  // so a ring hop's first bytes leave after one chunk, not after the whole operation.
  Bytes ring_chunk{512 << 10};

  // The built-in profiles: "reshard" (this project's executor) and "nemo_rl" (NeMo RL's Python
  // refit path, fitted to its published DGX H100 numbers). Throws ConfigError for other names.
  static CostParams profile_named(const std::string& name);
  // A YAML file with keys profile, efficiency {nvlink, c2c, pcie, network}, per_op, per_tensor,
  // per_broadcast_tensor, per_bucket, per_stage (durations with units), ring_chunk (bytes with a unit).
  static CostParams load(const std::filesystem::path& path);
};

struct Prediction {
  Seconds time;
  Seconds bandwidth_bound;
  Seconds pipeline;        // bandwidth bound with the pipeline fill of chained hops, plus latency_path
  Seconds latency_path;    // the DAG's longest path counting only route latency and per-op cost
  Seconds critical_path;
  Seconds overheads;
  LinkId bottleneck = -1;  // the link with the largest load/capacity
  Bytes network_bytes;     // bytes of operations routed over the network
  Bytes nvlink_bytes;      // bytes of operations inside an NVLink domain
  std::int64_t operations = 0;
  std::int64_t reshard_tensors = 0;    // tensors moved by reshard operations
  std::int64_t broadcast_tensors = 0;  // tensors moved by gather/broadcast operations
  std::int64_t broadcast_buckets = 0;
  std::int64_t broadcast_stages = 0;   // distinct heads that start broadcast rings (source PP stages)
  std::int32_t chain_hops = 1;         // Schedule::chain_hops and chain_parts: the pipeline fill is
  std::int32_t chain_parts = 1;        // pipeline / bandwidth_bound = (parts + hops - 1) / parts
};

Prediction estimate(const Schedule& s, const TransferSet& ts, const Inventory& inv, const Topology& topo,
                    const CostParams& params);

}  // namespace reshard::model
