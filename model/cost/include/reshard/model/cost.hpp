// The analytic cost model (docs/design.md §8).
//
// estimate() is a pure function of a schedule, its transfer set and inventory (the pieces' tensors,
// for the tensor counts, and the precision change's conversion work), the topology and the cost
// parameters:
//
//   load(l)      = sum over operations o of bytes(o) * share(o, l)     (R * b: the sparse routing
//                  matrix R, links x columns, times the byte vector b; Eigen). A transfer's share
//                  is 1/k on each of its route's k ECMP paths; a chain op's is w_l, the hops of its
//                  chain crossing l (model/chain.hpp)
//   C_l          = bandwidth(l) * efficiency(kind(l))
//   T_bandwidth  = max over links l of load(l) / C_l
//   r(o), t(o)   = o's rate and time alone, latency(o) its latency and fill(o) its pipeline fill
//                  (0 for a transfer): model/chain.hpp
//   T_critical   = longest path through the DAG with these t(o) (dependencies), ops taken in
//                  the executors' steps (model/memory.hpp), where an op starts once released, once
//                  its sender (and a plain transfer's receiver) has finished its part in the ops
//                  of the earlier steps (a chain root's part ends when it has sent), and a chain op
//                  in its chain's order (model/chain.hpp)
//   T_steps      = sum over steps k of max over network links l of load_k(l) / C_l: the steps one
//                  after another, each as long as its most loaded network link (NVLink inside a
//                  step is left to T_bandwidth; 0 for a schedule of one step, or for a profile
//                  without step barriers, CostParams::step_barriers)
//   T_latency    = longest path through the DAG with t(o) = per_op + latency(o) only
//   T_fill       = max over chain ops of fill(o) / r(o)
//   T_pipeline   = T_bandwidth + T_fill + T_latency: the links busy for T_bandwidth, the last
//                  chain's fill after it, and each step of a dependent sequence paying its latency
//                  and per-operation cost while its bytes share the links with everything else
//                  (what dominates schedules of kilobyte operations)
//   estimate     = T_convert_source + T_delta_source + T_gpu + overheads + T_delta_destination
//                  + T_convert_destination
//   T_convert_*  = a precision change's conversion on each side (model/precision.hpp): the
//                  largest over that side's GPUs of (bytes it converts, read + written) / its
//                  memory bandwidth (Topology::gpu_memory_bandwidth); 0 without a change
//   T_delta_*    = a delta refit's passes (model/delta.hpp): the source GPUs' diff against their
//                  snapshot and encode, the destination GPUs' decode, each the slowest GPU's
//                  (bytes read + written) / its memory bandwidth (a host snapshot: the larger of
//                  that and its host link bytes / the host link's bandwidth); 0 without a delta.
//                  The transfers' bytes are the encoded ones (model/schedule.hpp, encode_delta)
//   overheads    = T_serial + T_device + T_host, or, for a profile whose host work overlaps the
//                  GPUs' (host_overlaps), T_serial + T_device + max(0, T_host - T_gpu - T_device),
//                  with T_gpu = max(T_pipeline, T_critical, T_steps): only the host time beyond the
//                  GPUs' adds
//   T_serial     = T_host_copy + per_refit: what runs before or between the transfers and overlaps
//                  nothing
//   T_host       = per_tensor * calls + per_call_rank * call_ranks + per_broadcast_tensor * tensors
//                  moved by gather/broadcast operations + per_bucket * broadcast buckets + per_stage *
//                  broadcasting stages + T_load + T_reads + T_issue
//   calls        = tensors moved by reshard operations / tensor_streams
//   call_ranks   = the sum over those tensors of the GPUs that send or receive a part of each (the
//                  ranks a per-tensor call spans, whose planning and signalling grow with them) /
//                  tensor_streams
//   T_load       = load_per_tensor * L + load_per_expert * L_expert: the inference engine's
//                  load_weights on the busiest destination GPU, L the tensors handed to it (every
//                  tensor the schedule delivers any part of to that GPU, a local copy included),
//                  L_expert the routed-expert tensors among them (its MoE expert loop)
//   T_reads      = per_read * R: a pull-based transfer's reads (NIXL, Mooncake), R the piece slices
//                  the busiest destination GPU reads from other GPUs
//   T_issue      = engine_call * max over GPUs g of E(g): the calls reshard's engine issues from g's
//                  process (the nccl backend, exec/backends/src/nccl_backend.cpp and
//                  exec/step_lists.hpp: one process per GPU, one stream). A stream of n chunks
//                  (stream_chunk) moves in x = ceil(n / w) windows, w = S chunks for a transfer and
//                  max(floor(S / 2), 1) for a chain op (S the schedule's slots); per window and hop one
//                  ncclSend at its sender and one ncclRecv at its receiver. Per operation o that g
//                  takes part in, a local copy (src = dst) none:
//                    as o's sender:          x h + 1   a send per window and hop it sends; the op's
//                                                      start event
//                    per hop g receives:     x + 1     a receive per window; the hop's end event
//                    as a forwarder (chain): x h       a send per window and hop it sends
//                  (h: the hops g sends of o), and per step k it takes part in
//                  (2 + p + u) W(g,k) + 1: per wave the group's start and end, a pack launch where g
//                  packs (p = 1: it is the sender of an op of k) and an unpack launch where it
//                  receives (u = 1), and the step's end event. W(g,k): from the first to the last
//                  wave g takes part in in step k (exec::step_waves over windows: a hop of depth d, 1
//                  for a transfer, carries window c of o in wave offset(o) + c + d - 1, offset(o) the
//                  windows of the operations before o on its chain in k). Left out: an event per 128
//                  waves, and waves inside that range in which g has nothing (none
//                  where g's operations overlap in time). The host issues asynchronously, so
//                  T_issue hides behind the GPUs' time where host_overlaps (the reshard profile)
//   T_host_copy  = host_passes passes over the bytes each GPU sends (as a transfer's sender or a
//                  chain's root; weights staged in host memory and copied in before they leave),
//                  the slowest GPU's, at its host link's bandwidth (Topology::host_link)
//   per_refit    = what a refit pays once whatever it moves (group setup, control RPCs, the first
//                  synchronisation), where a source says what it covers
//   T_barrier    = the largest route latency from the schedule's lowest GPU to another: one round of
//                  a barrier in which every GPU signals every other at once (NCCL's GIN barrier)
//   T_copy       = copy_passes extra passes over the bytes each GPU sends and receives (a pack before
//                  sending, an unpack after receiving: each a read and a write), the slowest GPU's,
//                  at its memory bandwidth: the same memory-bound pass as T_convert
//   staging      = the peak extra memory of one GPU (model/memory.hpp), and which GPU
//
// Alone on an idle fabric an op's estimate is t(o), which is what the simulator gives it
// (sim/schedule_sim.hpp); under contention the simulator shares links max-min, which the estimate
// approximates by T_bandwidth.
#pragma once

#include <array>
#include <filesystem>
#include <initializer_list>
#include <string_view>
#include <string>

#include "reshard/model/schedule.hpp"

namespace reshard::model {

// The keys of the per-kind tables (efficiency, chain_hop_latency) in a parameters file, index LinkKind.
inline constexpr std::array<const char*, kLinkKinds> kLinkKindKeys = {"nvlink", "c2c", "pcie", "network"};

struct CostParams {
  // Hardware: achievable fraction of line rate by link kind, index LinkKind.
  std::array<double, kLinkKinds> efficiency = {0.82, 0.85, 0.85, 0.94};
  // The least latency of one hop of a chain op, by the kind of its route (index LinkKind): a
  // pipelined protocol's per-hop cost (flags, fences, proxy) where it exceeds the wire's; 0 keeps
  // the route's own latency (model/chain.hpp).
  std::array<Seconds, kLinkKinds> chain_hop_latency{};
  // Implementation profile.
  std::string profile = kDefaultProfile;
  // Per transfer operation: a small-message send/recv between two GPUs over NVLink takes about 3 us
  // (measured in nccl-tests reports), of which the NVLink route accounts for about 0.6 us.
  Seconds per_op{2.4e-6};
  Seconds per_tensor{0};         // per tensor moved by reshard operations (framework bookkeeping)
  Seconds per_call_rank{0};      // per such tensor and per GPU its call spans (call_ranks above)
  Seconds per_broadcast_tensor{0};  // per tensor moved by the gather/broadcast path
  Seconds per_bucket{0};         // per broadcast bucket (packing, launch, synchronisation)
  Seconds per_stage{0};          // per source pipeline stage that broadcasts (group setup, sequencing)
  // Concurrent streams the per-tensor calls of reshard operations are spread over (NeMo RL's
  // NRL_REFIT_NUM_STREAMS): per_tensor and the barriers count once per stream.
  std::int32_t tensor_streams = 1;
  // World-wide barriers per tensor moved by reshard operations (nccl_m2n: two per call), each
  // T_barrier, derived from the topology's latencies (the equations above).
  double barriers_per_tensor = 0;
  // Extra passes over the bytes moved, at each end, at the GPU's memory bandwidth (copy-engine pack
  // and unpack, torch.cat and split): T_copy above. 0: the transfer reads and writes in place.
  double copy_passes = 0;
  // The receive side: the inference engine's load_weights per tensor handed to it and per
  // routed-expert tensor on top (T_load above). 0: the transfer writes into the live tensors
  // (reshard's own engine).
  Seconds load_per_tensor{0};
  Seconds load_per_expert{0};
  // Per read of a pull-based transfer, the busiest destination GPU's reads (T_reads above).
  Seconds per_read{0};
  // Passes over the bytes each GPU sends through its host link (T_host_copy above): weights staged
  // in host memory (the scenario's source.weights_in: host). 0: they leave from GPU memory.
  double host_passes = 0;
  // Once per refit (T_serial above).
  Seconds per_refit{0};
  // The host's time per call reshard's engine issues (a kernel launch, an NCCL send or receive, a
  // group's start or end, an event): T_issue above. 0: the engine's issuing is not priced.
  Seconds engine_call{0};
  // Whether the host's per-tensor, per-bucket and per-stage work runs while the GPUs transfer (a
  // Python loop issuing asynchronous NCCL calls): then only the part of T_host beyond the GPUs'
  // time adds (the equations above). Off: it adds in full.
  bool host_overlaps = false;
  BytesPerSecond memory_copy_rate{2.15e12};  // local GPU copy payload: H200 D2D ~4.3 TB/s read+write / 2
  // Whether the implementation runs the ops in steps with a barrier on every GPU (reshard's own
  // executors, model/memory.hpp): then T_steps bounds the time. The profiles of other systems
  // (nemo_rl, nccl) model no such barrier.
  bool step_barriers = true;

  // A named profile: one of cost_profiles() (model/systems.hpp) -- "reshard" (this project's
  // engine), "nemo_rl", "miles", "nccl" (NCCL's own latency model, for collectives: `simulate
  // --collective`; a cost profile, not the transport of the same name) -- or a system profile's
  // name. Throws ConfigError naming the known ones for other names.
  static CostParams profile_named(const std::string& name);
  // A YAML file with keys profile, efficiency {nvlink, c2c, pcie, network}, chain_hop_latency
  // {nvlink, c2c, pcie, network}, per_op, per_tensor, per_call_rank, per_broadcast_tensor,
  // per_bucket, per_stage, load_per_tensor, load_per_expert, per_read, per_refit, engine_call (durations with units), tensor_streams,
  // barriers_per_tensor, copy_passes, host_passes, host_overlaps, step_barriers.
  static CostParams load(const std::filesystem::path& path);
  // The parameters file when one is named (`--params`), else the built-in profile (`--profile`).
  static CostParams named_or_loaded(const std::string& profile, const std::filesystem::path& params_file);
};

struct Prediction {
  Seconds time;
  Seconds bandwidth_bound;
  Seconds pipeline;        // bandwidth bound + fill + latency_path
  Seconds latency_path;    // the DAG's longest path counting only route latency and per-op cost
  Seconds critical_path;
  Seconds overheads;            // what adds after T_gpu (the equations above)
  Seconds host;                 // T_host, hidden or not
  Seconds device;               // T_device: the barriers' and the copies' time
  Seconds barrier;              // T_barrier, one barrier (0 when the profile runs no barriers)
  Seconds copies;               // T_copy
  Seconds convert_source;       // T_convert_source: before the first byte is sent
  Seconds convert_destination;  // T_convert_destination: after the last byte has arrived
  Seconds delta_source;         // T_delta_source: a delta refit's diff and encode, before the first byte
  Seconds delta_destination;    // T_delta_destination: its decode, after the last byte
  Seconds load;                 // T_load: the receive side's load_weights (part of T_host)
  Seconds reads;                // T_reads: a pull's per-read cost (part of T_host)
  Seconds host_copies;          // T_host_copy: staging through host memory (part of T_serial)
  Seconds fixed;                // per_refit (part of T_serial)
  Seconds issue;                // T_issue: the engine's calls from its busiest process (part of T_host)
  LinkId bottleneck = -1;  // the link with the largest load/capacity
  Bytes network_bytes;     // bytes of operations routed over the network
  Bytes nvlink_bytes;      // bytes of operations inside an NVLink domain
  std::int64_t operations = 0;
  std::int64_t reshard_tensors = 0;    // tensors moved by reshard operations
  std::int64_t call_ranks = 0;         // the sum over them of the GPUs each one's moves span (counted
                                       // only for a profile with per_call_rank)
  std::int64_t broadcast_tensors = 0;  // tensors moved by gather/broadcast operations
  std::int64_t broadcast_buckets = 0;
  std::int64_t broadcast_stages = 0;   // distinct heads that start broadcast rings (source PP stages)
  std::int64_t loaded_tensors = 0;     // L: tensors handed to the busiest destination GPU's loader
  std::int64_t loaded_experts = 0;     // L_expert: the routed-expert tensors among them
  std::int64_t read_count = 0;         // R: the piece slices the busiest destination GPU reads
  std::int64_t engine_calls = 0;       // E(g) of the GPU whose process issues the most (counted only
                                       // for a profile with engine_call)
  Seconds fill;                        // the largest pipeline fill of a chain op alone (T_fill)
  std::int32_t chain_depth = 0;        // the deepest chain (hops from root to its farthest leaf)
  Bytes staging_peak;                  // peak extra (staging) memory of one GPU (model/memory.hpp)
  GpuId staging_gpu = -1;              // the GPU that needs it
  std::int32_t steps = 0;              // the steps the executors run the ops in (op_steps)
  std::int32_t over_budget = 0;        // GPUs over their staging budget (StagingMemory::over_budget)
  Seconds steps_bound;                 // T_steps: the sum over steps of each step's bandwidth bound (0: one step)
};

// Every field of a prediction, exactly: prediction_from_json(to_json(p)) == p, bit for bit (for
// results that cross between processes). Times as time_json writes them, byte counts as JSON
// numbers. prediction_from_json throws ConfigError at "prediction" for a document to_json did not
// write.
nlohmann::json to_json(const Prediction& p);
Prediction prediction_from_json(const nlohmann::json& j);
// The named fields of `p` (the names to_json writes: estimate_s, bandwidth_bound_s, ...,
// peak_staging_bytes, over_budget_gpus), numbers as they are (a non-finite time becomes JSON null):
// what compare's rows and systems and the Python module print of a prediction.
nlohmann::json prediction_fields(const Prediction& p, std::initializer_list<std::string_view> names);
// A time exactly: a JSON number (nlohmann writes the shortest text that reads back to the same
// double), a non-finite one the string "inf", "-inf" or "nan". time_from_json throws ConfigError
// at "time" for anything else.
nlohmann::json time_json(Seconds t);
Seconds time_from_json(const nlohmann::json& j);

// Throws ScheduleError naming the operation for an op list op_problem refuses (a GPU the topology
// does not have, an `after` that does not precede), PlanError for a conversion on a GPU whose
// memory bandwidth the topology does not give.
Prediction estimate(const Schedule& s, const TransferSet& ts, const Inventory& inv, const Topology& topo,
                    const CostParams& params);

// E(g) of T_issue (the equations above) for every GPU of a topology of `gpu_count` GPUs, index GpuId.
// Throws ScheduleError for a chain whose shape chain_depths refuses.
std::vector<std::int64_t> engine_calls(const Schedule& s, std::int32_t gpu_count);

// T_convert of one side: the largest over its GPUs of bytes / memory bandwidth (0 for no work).
Seconds conversion_time(const std::vector<std::pair<GpuId, Bytes>>& work, const Topology& topo);
// T_delta_source and T_delta_destination of a delta refit's work (0 without a delta).
Seconds delta_source_time(const DeltaWork& work, const Topology& topo);
Seconds delta_destination_time(const DeltaWork& work, const Topology& topo);

}  // namespace reshard::model
