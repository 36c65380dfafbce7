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

  struct Data;  // defined where the builders are (model/src/strategies.cpp)
  const Data& data() const { return *data_; }

 private:
  std::unique_ptr<const Data> data_;
};

// build_schedule(ts, inv, src, dst, topo, params, budget) on the basis's inputs; the same schedule.
Schedule build_schedule(const ScheduleBasis& basis, const StrategyParams& params);

}  // namespace reshard::model
