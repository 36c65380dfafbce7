// The GPU backends' steps compiled into device copy lists (exec/device_list.hpp), once per run plan
// and arena layout, before anything is timed (docs/execution.md, "The GPU engine").
//
// cuda (virtual_gpu_lists): every GPU of the run a virtual GPU in one arena; a step is one list, one
// launch. Each role of an op's stream (exec/program.hpp) is a lane whose task k handles chunk k:
//   sender    packs chunk k into its slot (runs of for_each_chunk_copy); waits until every child
//             has taken chunk k - S out of that slot (its counter >= k - S + 1);
//   receiver  copies chunk k from its parent's slot into its own (the hop), flips the injected byte
//             when it is dst, then unpacks chunk k; waits until the parent has chunk k (>= k + 1)
//             and, on a ring, until every child has taken chunk k - S;
// and sets its counter to k + 1. The global order is (chunk, op, the role's place in the tree: the
// sender, then each hop's `to` in hop order), in which every wait names an earlier task.
//
// nccl (nccl_steps): one process's GPUs; a step is a sequence of waves, each a pack list, one group
// of ncclSend/ncclRecv calls and an unpack list. A stream moves in windows of W chunks, W = S for a
// plain transfer (its receiver forwards nothing) and floor(S / 2) for a chain op (an inner GPU
// receives window w + 1 into one half of its ring while it forwards window w from the other):
// window w crosses a hop of depth d in wave offset + w + d - 1 (exec::step_waves over windows), as
// one send and one receive of the window's bytes (two where the window wraps around the ring).
#pragma once

#include <cstdint>
#include <vector>

#include "reshard/exec/device_list.hpp"
#include "reshard/exec/fault.hpp"
#include "reshard/exec/program.hpp"

namespace reshard::exec {

// Per program, per region: the region's byte offset from the arena's base.
using ArenaOffsets = std::vector<std::vector<std::int64_t>>;

struct StepLists {
  std::vector<list::List> steps;  // per step
  std::int32_t counters = 0;      // the counters of every step (each step has a range of its own)
};

// The cuda backend's lists: every GPU of `progs` (all the run's GPUs) in one arena laid out as `at`.
// `faults`: drop:OP (nothing leaves the sender: its children's hop copies are left out) and
// corrupt:OP (the byte of corrupt_offset flipped at dst when its chunk arrives, before dst forwards
// or unpacks it).
StepLists virtual_gpu_lists(const RunPlan& plan, const std::vector<GpuProgram>& progs, const ArenaOffsets& at,
                            const std::vector<Fault>& faults);

// The chunks a window of `op`'s stream holds on the nccl backend: S for a plain transfer,
// floor(S / 2) (at least 1) for a chain op.
std::int64_t window_chunks(const model::Schedule& s, const model::Op& op);

// One ncclSend (send) or ncclRecv of `bytes` at arena offset `offset` to or from process `peer`.
struct P2p {
  bool send = false;
  std::int64_t offset = 0, bytes = 0;
  std::int32_t peer = 0;
};

struct NcclWave {
  list::List pack;                  // before the group: the windows that leave a local sender in this wave
  std::vector<P2p> calls;           // the group, in (op, hop) order, as every process issues them
  list::List unpack;                // after the group: the windows that arrived (flipped, then unpacked)
  std::vector<std::int64_t> starts; // ops whose start is the beginning of this wave (their first window leaves here)
  std::vector<std::int64_t> ends;   // ops one of whose ends is the end of this wave (their last window arrives here)
};

struct NcclStep {
  std::vector<NcclWave> waves;
  std::vector<std::int32_t> peers;  // the processes this one receives from in the step (a timeout names them)
};

// The nccl backend's steps for process `rank` of `world`: `progs` are its GPUs' programs
// (gpus_of_process order), laid out as `at`. Faults as virtual_gpu_lists; drop:OP: nothing leaves
// the sender (its receivers wait for it until the timeout).
std::vector<NcclStep> nccl_steps(const RunPlan& plan, const std::vector<GpuProgram>& progs, const ArenaOffsets& at,
                                 const std::vector<Fault>& faults, int rank, int world);

}  // namespace reshard::exec
