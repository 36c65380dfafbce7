// The exact reshard planner (docs/design.md §6).
//
// plan() intersects, tensor by tensor, the source shards with the destination shards. Shards of
// one side are disjoint and cover their tensor (verify_coverage), so the non-empty intersections
// ("pieces") partition every destination shard: every destination element is covered exactly once,
// and every rank of the source shard's set holds the piece. The intersection is a sweep over
// dimension 0 (boxes sorted by start, an active list per side), not an all-pairs comparison.
// Holders and needers stay interned rank sets of the two ShardMaps, never expanded.
//
// The lower bound is the largest of these cut bounds, each bytes / capacity over raw link
// bandwidths (no schedule can beat any of them):
//   dest_gpu_ingress    bytes a destination GPU must receive (pieces it needs and does not hold as
//                       a source) / the bandwidth of all links entering that GPU
//   dest_domain_ingress bytes that must enter a destination NVLink domain (pieces some GPU in it
//                       needs, held by no GPU in it; each counted once, as it can be fanned out
//                       over NVLink) / the domain's network ingress cut
//   source_egress       bytes that must leave the union of the source GPUs' domains (pieces some
//                       needer outside it needs, once) / the sum of those domains' egress cuts
//   source_domain_egress bytes only one source domain holds that must leave it / its egress cut
//   source_gpu_egress   bytes only one source GPU holds that another GPU needs / its egress links
//   dest_fabric_ingress bytes that must enter a leaf group or pod (pieces some GPU in it needs, held
//                       by none in it; once) / the links into it from the switch tier above
//   source_fabric_egress bytes held only inside one leaf group (pod) and needed in another / the
//                       links out of it to the tier above (Topology::fabric_groups)
// A domain's network cut (Topology::domain_network_cut) counts, per GPU, the narrower of its NIC
// link and its GPU <-> NIC host link (PCIe, C2C): every byte a GPU exchanges with the network
// crosses both, so a 200 GB/s NIC behind 64 GB/s PCIe gives 64 GB/s. In explicit topologies it is
// the minimum cut around the domain's host side (shared NICs, PCIe switches, CPUs). When links
// other than NIC links form the worst cut, its `where` names them: "domain 9: host links PCIe
// 64 GB/s per GPU"; see docs/lower-bound.md.
#pragma once

#include <string>
#include <vector>

#include "reshard/model/layout.hpp"
#include "reshard/model/precision.hpp"

namespace reshard::model {

struct Piece {
  std::int32_t tensor = -1;
  Box box;
  Bytes bytes;
  RankSetId holders = -1;  // in the source ShardMap
  RankSetId needers = -1;  // in the destination ShardMap
  std::int64_t elements = 0;  // box.elements(), at hand without reaching into the box
};

struct CutBound {
  std::string cut;    // "dest_domain_ingress", ...
  std::string where;  // "domain 9", "gpu 300", "source side", "pod 1: 288 GPUs"; domain and side cuts
                      // formed by links other than NIC links add them: "domain 9: host links PCIe
                      // 64 GB/s per GPU"
  Bytes bytes;
  BytesPerSecond capacity;
  Seconds time() const { return capacity.value > 0 ? bytes / capacity : Seconds{0}; }
};

struct LowerBound {
  Seconds time;
  CutBound binding;             // the cut that sets it
  std::vector<CutBound> cuts;   // the worst instance of each cut kind
};

// A delta refit's passes (model/delta.hpp), per GPU, sorted by GPU; empty without a delta.
struct DeltaWork {
  std::vector<std::pair<GpuId, Bytes>> source;       // memory bytes of the diff and encode pass
  std::vector<std::pair<GpuId, Bytes>> source_host;  // host link bytes of it (snapshot in host memory)
  std::vector<std::pair<GpuId, Bytes>> destination;  // memory bytes of the decode pass
  std::vector<std::pair<GpuId, Bytes>> snapshot;     // W(g): the snapshot's bytes (GPU or host memory)
  Bytes source_bytes, destination_bytes, snapshot_bytes;  // sums over the GPUs
};
DeltaWork delta_work(const Inventory& inv, const ShardMap& src, const ShardMap& dst);

struct TransferSet {
  std::vector<Piece> pieces;
  Bytes logical_bytes;  // the model's bytes
  Bytes bytes_needed;   // sum over destination ranks of the bytes each must end up holding
  Bytes bytes_to_move;  // bytes_needed less what a destination GPU already holds as a source
  ConversionWork conversion;  // a precision change's conversion work per GPU (model/precision.hpp)
  DeltaWork delta;            // a delta refit's passes per GPU (model/delta.hpp)
};

// `threads`: tensors intersected at once (0: one thread per hardware thread); the same pieces, in
// the same order, on any number.
TransferSet plan(const Inventory& inv, const ShardMap& src, const ShardMap& dst, int threads = 1);

// The transfer set over a changed membership, from the full one without intersecting again: each
// piece's holders and needers mapped through `holders` and `needers` (a rank set id of the full
// plan's maps -> its id in `src` and `dst`, the maps ShardMap::restricted_to made, -1 where no rank
// survives); a piece no surviving rank needs is dropped, the byte totals and conversion work counted
// over `src` and `dst` as plan() counts them. PlanError when a needed piece keeps no holder (callers
// name those first: model/membership.hpp). The pieces are plan(inv, src, dst)'s, in its order.
TransferSet restrict_transfers(const TransferSet& full, const std::vector<RankSetId>& holders,
                               const std::vector<RankSetId>& needers, const Inventory& inv, const ShardMap& src,
                               const ShardMap& dst);

LowerBound lower_bound(const TransferSet& ts, const ShardMap& src, const ShardMap& dst, const Topology& topo);

// Bytes each destination rank must receive from another GPU, and each source rank's even share of
// what must leave it (a piece's bytes split evenly over its holders).
struct GpuTraffic {
  std::vector<Bytes> dest_received;  // per destination rank
  std::vector<Bytes> source_sent;    // per source rank
};
GpuTraffic gpu_traffic(const TransferSet& ts, const ShardMap& src, const ShardMap& dst);

}  // namespace reshard::model
