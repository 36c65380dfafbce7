// Staging memory: the extra memory per GPU a schedule's executor holds besides the source and
// destination shards, bounded by each GPU's staging budget (docs/design.md, "Staging memory").
// The one definition the estimate, the simulator, `reshard check` and the three executors share.
//
// Streams. Every operation moves its part (B = Op::bytes) in chunks of c bytes (stream_chunk: its
// chain's chunk, a plain transfer's the schedule's params.chunk) through a ring of S = Schedule::
// slots chunk slots at each of its GPUs (ring_bytes = min(B, S c)):
//   sender     (a transfer's src, a chain's root) packs chunk k into slot k mod S from the source
//              shards (or a kept receive, below) and sends it; the slot is free again once chunk k
//              has left for every child;
//   receiver   (a transfer's dst, a chain hop's `to`) receives chunk k into slot k mod S, forwards it
//              to its children (a chain's inner GPUs and relays), unpacks into its destination shards
//              what it needs of it; the slot is free again once chunk k is forwarded and unpacked.
// A receive that a later operation of the same GPU forwards from (one whose `after` names it and
// whose src is that GPU: gather_broadcast's head packs its buckets from what it gathered) is *kept*:
// it holds all B bytes, from its step until the step of the last such operation. So an operation
// holds at a GPU (footprint):
//   f(o, g) = ring_bytes(o) per role it has there (send, receive), B(o) for a kept receive,
// held for the whole of o's step (the executors take a step's regions when the step opens; ops of
// one chain in one step each hold their own ring, though they run one after another).
//
// Steps. The executors run the operations step by step: a GPU starts an operation of step k once
// its own operations of the steps before are finished. op_steps places operation o, in id order,
// in the first step k >= base(o) where every GPU g of o has room for it:
//   base(o)  = max(1 + step(a) for a in after(o); step of the previous op on o's chain)
//   room:      live(g, k) + open(g) + f(o, g) <= M(g)      (M(g) = Schedule::budget[g]; unbounded
//              when the budget is empty or 0 for g)
//   open(g)  = the kept receives at g whose last forwarder is not placed yet (counted in every step
//              until it is: a conservative bound that the placed intervals then replace)
// and, at a GPU that keeps receives, no earlier than the latest step placed there (its steps never
// go back, so a kept receive's interval holds only ops checked against it).
// An operation that fits no step even alone (f(o, g) + open(g) > M(g)) goes to base(o) and its GPU
// is over budget (StagingMemory::over_budget). Without any budget the steps are the dependency
// depths. With S_k the ops of step k,
//   live(g, k) = sum over o in S_k of f(o, g)
//              + sum over kept receives a at g with step(a) < k <= last(a, g) of B(a)
//   peak(g)    = max over k of live(g, k) <= M(g);     peak = max over g of peak(g)
// The executor's own bookkeeping, NCCL's buffers and the allocator's rounding are not counted
// (docs/limitations.md).
#pragma once

#include <cstdint>
#include <vector>

#include "reshard/model/schedule.hpp"

namespace reshard::model {

// The chunk `op` streams in: its chain's chunk, or a transfer's the schedule's params.chunk.
Bytes stream_chunk(const Schedule& s, const Op& op);
// min(B, S c): what one role of `op` holds at a GPU when it is not a kept receive.
Bytes ring_bytes(const Schedule& s, const Op& op);
// The budget of GPU g (Schedule::budget; 0: unbounded).
inline Bytes staging_budget(const Schedule& s, GpuId g) {
  return g >= 0 && static_cast<std::size_t>(g) < s.budget.size() ? s.budget[static_cast<std::size_t>(g)] : Bytes{0};
}

// The step of every operation (above) and their number. Every executor runs the ops step by step.
std::vector<std::int32_t> op_steps(const Schedule& s, std::int32_t& count);

struct StagingMemory {
  std::vector<Bytes> per_gpu;   // peak(g), index GpuId (0 .. the largest GPU the schedule names)
  Bytes peak;                   // the largest peak(g)
  GpuId gpu = -1;               // the GPU with the largest (the lowest such id); -1: no operation
  std::int32_t step = -1;       // the step where that GPU reaches it
  std::int32_t steps = 0;       // op_steps' count
  std::int32_t over_budget = 0; // GPUs whose peak exceeds their budget (an op that fits no step)
  GpuId worst_over = -1;        // the GPU furthest over its budget, -1 when none is
};

// The staging memory of a schedule (above). Reads only the op list, the chains and the staging
// fields; a schedule op_problem refuses is the caller's to check first.
StagingMemory staging_memory(const Schedule& s);
// The same, with op_steps' step of every operation written to `steps` (packed once for both).
StagingMemory staging_memory(const Schedule& s, std::vector<std::int32_t>* steps);

// Whether GPU g receives op o (a transfer's dst, a chain hop's `to`).
bool receives(const Schedule& s, const Op& o, GpuId g);

// Per op: whether a later op forwards from its receive at that op's src (the receive is kept at
// that GPU). kept_receives(s)[a] lists the GPUs at which op a's receive is kept, ascending.
std::vector<std::vector<GpuId>> kept_receives(const Schedule& s);

}  // namespace reshard::model
