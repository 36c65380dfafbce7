// Schedules and the strategies that build them (DESIGN.md §7).
//
// A Schedule is a DAG of operations. A Transfer moves bytes from one GPU to another (over the route
// the topology gives for the pair); it carries slices of pieces: a slice is a run of elements of
// the piece's box in row-major order, so a piece can be chunked for pipelining. Operations list the
// ids of the operations they wait for in `after`; ids are dense and every `after` id is smaller
// than the operation's own id, so the DAG is acyclic by construction and an executor can post
// operations in id order. Transfers between the same pair in the same step are packed into one
// operation (one buffer).
//
// Strategies:
//   direct            every needer GPU gets each piece straight from one holder; holders balanced
//                     by bytes sent, a holder in the needer's own NVLink domain preferred.
//   domain_grouped    each piece crosses the network once per destination NVLink domain, to an
//                     ingress GPU of that domain (a needer, chosen to balance ingress bytes and to
//                     match the holder's rail), which forwards it over NVLink to the other needers.
//   domain_chain      as grouped, but the piece enters the first domain from a holder and each
//                     domain's ingress forwards it to the next domain's ingress, chunk by chunk, so
//                     the hops pipeline.
//   gather_broadcast  the NeMo RL / slime / verl baseline: per PP stage a head rank gathers full
//                     tensors from their holders, then broadcasts them in buckets along a ring over
//                     every destination GPU; each destination keeps its slice (it still receives
//                     the whole bucket).
//   hybrid            FFN and expert weights by domain_chain, everything else by gather_broadcast.
//   nemo_rl_reshard   NeMo RL's nccl_reshard deployment: FFN (dense and experts) by the
//                     hierarchical domain chain, attention/embeddings/norms/router/head/Mamba by
//                     the packed broadcast.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "reshard/model/planner.hpp"

namespace reshard::model {

struct PieceSlice {
  std::int32_t piece = -1;
  std::int64_t offset = 0;  // first element, row-major within the piece's box
  std::int64_t count = 0;   // elements
};

// A packed buffer: slices of pieces, concatenated. Operations move whole buffers or parts of them,
// and a buffer forwarded along a chain keeps its content, so part c of one hop is part c of the next.
struct Buffer {
  std::vector<PieceSlice> slices;
  Bytes bytes;
};

enum class OpPhase : std::uint8_t { Direct, Gather, Broadcast, Ingress, FanOut, Forward };
const char* to_string(OpPhase p);

// Moves part `part` of `parts` equal parts (by element, in slice order) of buffer `buffer` from GPU
// `src` to GPU `dst` once every operation in `after` has finished.
struct Op {
  std::int64_t id = -1;
  GpuId src = -1;
  GpuId dst = -1;
  std::int32_t buffer = -1;
  std::int32_t part = 0;
  std::int32_t parts = 1;
  Bytes bytes;
  OpPhase phase = OpPhase::Direct;
  std::vector<std::int64_t> after;
};

struct StrategyParams {
  std::string strategy = "domain_chain";
  std::int32_t chunks = 4;           // pipeline parts per buffer (chain hops, broadcast ring hops)
  std::int32_t max_chain = 8;        // domains per chain; longer lists split into chains fed by other holders
  // gather_broadcast bucket size, two buckets in flight per head. NeMo RL: 2 % of GPU memory capped
  // at 5 GB -> 1.6 GB on an 80 GB H100.
  Bytes bucket{1'600'000'000};
  bool rail_aligned_ingress = true;  // prefer ingress GPUs on the holder's rail
  bool relay_ingress = false;        // any GPU of a domain may be its ingress, needed there or not
  bool relay_egress = false;         // any GPU of a holder's domain may send (fed over NVLink)
};

struct Schedule {
  std::string scenario;
  StrategyParams params;
  std::int32_t piece_count = 0;
  // The longest chain of network hops one part travels and the parts a buffer is cut into on it:
  // a chain of H hops in C parts takes (C + H - 1) / C of one hop's time once links are shared.
  std::int32_t chain_hops = 1;
  std::int32_t chain_parts = 1;
  std::vector<Buffer> buffers;
  std::vector<Op> ops;
};

// Calls f(piece, begin, end) for the element ranges [begin, end) of each slice that part `part` of
// `parts` of buffer `b` covers, in slice order. Part c covers the buffer's elements
// [total * c / parts, total * (c + 1) / parts) (total = the sum of the slice counts), so parts
// differ by at most one element and tile the buffer. Executors and the validator share this rule.
template <class F>
void for_each_in_part(const Buffer& b, std::int32_t part, std::int32_t parts, F&& f) {
  std::int64_t total = 0;
  for (const auto& s : b.slices) total += s.count;
  const std::int64_t lo = total * part / parts, hi = total * (part + 1) / parts;
  std::int64_t pos = 0;
  for (const auto& s : b.slices) {
    const std::int64_t a = lo > pos ? lo : pos, e = hi < pos + s.count ? hi : pos + s.count;
    if (a < e) f(s.piece, s.offset + (a - pos), s.offset + (e - pos));
    pos += s.count;
    if (pos >= hi) break;
  }
}

const std::vector<std::string>& strategy_names();  // named strategies (not "auto")

// A strategy with its parameters in one line, as the tuner prints it and the CLI reads it:
// "NAME [chunks=N] [max_chain=N] [bucket=BYTES] [relay_ingress] [relay_egress] [rail_blind]".
// describe() writes only what the strategy uses; parse_strategy() starts from the defaults and
// throws PlanError naming the token it cannot read (the name itself is checked by build_schedule).
std::string describe(const StrategyParams& p);
StrategyParams parse_strategy(const std::string& spec);

// Builds the schedule of a named strategy. Throws PlanError for an unknown name.
Schedule build_schedule(const TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst,
                        const Topology& topo, const StrategyParams& params);

// Checks a schedule against its transfer set: every needer GPU receives every element of every
// piece it needs exactly once (unless it already holds it as a source), a GPU sends only what it
// holds as a source or received in an operation it waits for, `after` ids precede, bytes match the
// slices. Throws ScheduleError naming the operation, the piece and the GPU.
void validate(const Schedule& s, const TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst);

nlohmann::json to_json(const Schedule& s);
Schedule schedule_from_json(const nlohmann::json& j);  // throws ScheduleError on a malformed document
// Reads a schedule JSON file; an unreadable file, bad JSON or a malformed schedule is a ConfigError
// naming the file. Whether it matches a scenario is for the caller to check.
Schedule read_schedule_file(const std::string& path);

}  // namespace reshard::model
