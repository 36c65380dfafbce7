// Staging memory: the extra memory per GPU a schedule's executor holds besides the source and
// destination shards (docs/design.md, "Staging memory").
//
// The executor (exec/executor.hpp) gives each GPU one staging region of the part's B bytes
// (Op::bytes) per operation it takes part in:
//   a transfer            a send region at src, a receive region at dst (both at a local copy's GPU);
//   a chain op            a send region at its root, a receive region at every hop's `to`: inner
//                         GPUs and relays hold the whole part (never only kChainSlots chunks);
//   a broadcast bucket    one chain op per channel: every ring GPU holds all of the bucket it receives.
// It runs the operations step by step (op_steps: the dependency depth, a chain op no shallower than
// the previous one on its chain): a GPU starts the operations of step k once it has finished its
// own of the steps before; ops on one chain run one after another. A region is released when its
// operation is done here, except a receive region a later operation of this GPU forwards from (one
// whose `after` names it): it is kept until that operation has packed.
//
// With S_k the ops of step k, C_k(c) those of chain c among them, R(o, g) = 1 when GPU g sends o
// (src of a transfer, root of a chain) plus 1 when it receives o (dst of a transfer, a hop's `to`),
//   live(g, k) = sum over transfers o in S_k of R(o, g) B(o)
//              + sum over chains c of max over o in C_k(c) of R(o, g) B(o)
//              + sum over ops a with step(a) < k <= last(a, g) of B(a)        (kept for forwarding)
//   last(a, g) = the largest step of an op x sent by g with a in after(x), when g receives a
//   peak(g)    = max over k of live(g, k);      peak = max over g of peak(g)
// (the per-chain maximum: a chain's ops of one step never hold their regions at once). The
// executor's own bookkeeping, NCCL's buffers and the allocator's rounding are not counted
// (docs/limitations.md).
#pragma once

#include <cstdint>
#include <vector>

#include "reshard/model/schedule.hpp"

namespace reshard::model {

// The step of every operation (the dependency depth: 0 without `after`, else 1 + the largest step
// of the ops in `after`; a chain op also no shallower than the previous op on its chain) and their
// number. The executors run the ops step by step.
std::vector<std::int32_t> op_steps(const Schedule& s, std::int32_t& count);

struct StagingMemory {
  std::vector<Bytes> per_gpu;   // peak(g), index GpuId (0 .. the largest GPU the schedule names)
  Bytes peak;                   // the largest peak(g)
  GpuId gpu = -1;               // the GPU with the largest (the lowest such id); -1: no operation
  std::int32_t step = -1;       // the step where that GPU reaches it
};

// The staging memory of a schedule (above). Reads only the op list and the chains; a schedule
// op_problem refuses is the caller's to check first.
StagingMemory staging_memory(const Schedule& s);

}  // namespace reshard::model
