// The strategies that build schedules (model/schedule.hpp), their basis, and build_schedule.
//
// Strategies:
//   direct            every needer GPU gets each piece straight from one holder; holders balanced
//                     by bytes sent, a holder in the needer's own NVLink domain preferred.
//   domain_grouped    each piece crosses the network once per destination NVLink domain, to an
//                     ingress GPU of that domain (a needer, chosen to balance ingress bytes and to
//                     match the holder's rail), which forwards it over NVLink to the other needers:
//                     one chain op per stripe, holder -> ingress -> fan-out, pipelined in chunks.
//   domain_chain      as grouped, but the piece enters the first domain from a holder and each
//                     domain's ingress forwards it to the next domain's ingress (and fans it out
//                     in its own domain), chunk by chunk: one chain op per stripe and chain.
//   gather_broadcast  the NeMo RL / slime / verl baseline: per PP stage a head rank gathers full
//                     tensors from their holders, then broadcasts them in buckets along rings over
//                     every destination GPU (one chain op per bucket and channel, as NCCL runs one
//                     ring per channel); each destination keeps its slice (it still receives the
//                     whole bucket).
//   hybrid            FFN and expert weights by domain_chain, everything else by domain_grouped.
//   nemo_rl_reshard   NeMo RL's nccl_reshard deployment: FFN (dense and experts) by the
//                     hierarchical domain chain over every destination domain in 256 KB chunks
//                     (M2N's ring), attention/embeddings/norms/router/head/Mamba by the packed
//                     broadcast.
//
// What the strategies' schedule builders derive from a plan alone, whatever the strategy's
// parameters, computed once and shared by every schedule built on that plan (the named
// strategies and the tuner's candidates):
//   - the pieces grouped into piece classes (PieceClass: same holder rank set, same needer rank
//     set; not a TensorClass), for all pieces, the FFN pieces and the rest, in (holders, needers)
//     order;
//   - per piece class: its buffer (every piece whole), its holder GPUs, its receivers (needers
//     that do not hold it) by NVLink domain, and the holders inside each of those domains;
//   - the GPUs of every rank set, and the domain and rail of every GPU;
//   - the staging budget of every GPU (model/memory.hpp) the schedules are built for.
// A basis is immutable once built: threads may build schedules on one basis at once. It refers to
// the plan, inventory, layouts and topology it was built from, which must outlive it.
#pragma once

#include <memory>

#include "reshard/model/schedule.hpp"

namespace reshard::model {

class ScheduleBasis {
 public:
  // `budget`: per GPU (index GpuId) its staging budget, 0 or absent: unbounded (Schedule::budget).
  ScheduleBasis(const TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst,
                const Topology& topo, std::vector<Bytes> budget = {});
  ~ScheduleBasis();
  ScheduleBasis(const ScheduleBasis&) = delete;
  ScheduleBasis& operator=(const ScheduleBasis&) = delete;

  const TransferSet& transfers() const;
  const Inventory& inventory() const;
  const ShardMap& source() const;
  const ShardMap& destination() const;
  const Topology& topology() const;
  const std::vector<Bytes>& budget() const;

  struct Data;  // what the builders share; defined where they are (strategies.cpp)

 private:
  friend struct BasisAccess;
  std::unique_ptr<const Data> data_;
};

// Builds the schedule of a named strategy within the basis's staging budget per GPU (0 or absent:
// unbounded): every operation streams through rings of Schedule::slots chunks, the chunk and the
// slots shrunk to fit the smallest budget (at least kMinSlots chunks), gather_broadcast's buckets
// sized to fit its heads' budgets, and op_steps (model/memory.hpp) spreads the operations over
// steps so that no GPU holds more than its budget. From a scenario, take
// PlannedScenario::schedule_for (model/planned.hpp), which also resolves "auto".
Schedule build_schedule(const ScheduleBasis& basis, const StrategyParams& params);
// The same on a basis made for this one schedule (tests and benchmarks).
Schedule build_schedule(const TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst,
                        const Topology& topo, const StrategyParams& params, const std::vector<Bytes>& budget = {});

}  // namespace reshard::model
