// The refit plan file (docs/execution.md, "Refit plan file"): a run's per-GPU programs
// (exec/program.hpp) expanded, with everything a runner needs and nothing it must compute again,
// so a process with no compiled reshard (the pure-Python runner reshard.torch, on a machine that
// only has PyTorch) runs the same schedule the C++ backends run. Format `reshard-refit-plan-2`: JSON
// lines, so that a runner reads the header and its own rank's program, never the whole file:
//
//   line 1          the header (below, without `ranks`) and its `fingerprint` (a digest of it);
//   line 2 + r      rank r's program (an entry of `ranks` below; empty where it was not asked for);
//   next line       {"ranks": [[byte offset, bytes], ...]}: where each rank's line lies in the file;
//   last line       the offset of that index line, 20 decimal digits.
//
// The header and the rank programs:
//
//   format, scenario, strategy (describe()), slots, steps, world_size (= GPUs of the run: process
//     rank r runs GPU gpus[r]), gpus, budgets (per rank: its staging budget in bytes, 0: unbounded;
//     reshard.torch sizes its message windows within it),
//   model     name, architecture, hidden_size, num_attention_heads, num_key_value_heads, head_dim,
//             num_experts (what framework adapters need to unfuse a layout, reshard/adapters.py),
//   tensors   per tensor of the inventory: name, dtype, element_size, shape,
//   ops       per operation: id, step, chain (-1: a plain transfer), chunks, chunk, bytes, offset (the wave its chunk 0 leaves
//             the sender in, within its step: exec::step_waves), hops [[from rank, to rank], ...]
//             (a plain transfer: one), depth per hop, kept (the ranks where its receive is kept
//             whole for a later send to pack from),
//   step_waves per step: its number of waves,
//   ranks     per rank: gpu, expert_slots (a destination rank with expert parallelism: its
//             routed experts in the order of its physical slots, EPLB's copies included, which
//             reshard/adapters.py maps a fused expert tensor by), regions [{kind, tensor, box [[lo, hi], ...], op, bytes}], local copy
//             runs, sends and receives (the streams: op, peer rank, region, chain, chunk, bytes,
//             slots (0: kept), children ranks, hop, child_hops, copies), and pieces [[piece, side,
//             region, box, weight]] (each piece it holds or needs: its box in the tensor, which with the
//             region's box says where it lies in the shard: what digest verification reads; weight:
//             the piece's first holder -(H + N - 1), every other holder and needer 1, for H holding
//             and N needing GPUs, so that the weighted sum of a piece's digests over the run is 0
//             when all are equal: one sum over the group checks every piece).
// A copy run is [src region, dst region, src offset, dst offset, bytes], or with three more fields
// [..., count, src stride, dst stride] `count` such runs, the k-th at offsets + k strides (a box's
// rows in its shard: a program grows with its boxes, not their rows); a stream's copies are in
// stream coordinates (exec/program.hpp). Ranks and regions are indices into these lists.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "reshard/exec/program.hpp"

namespace reshard::exec {

inline constexpr const char* kRefitPlanFormat = "reshard-refit-plan-2";

// The plan file's text for a run plan, with the programs of `ranks` (all when empty; a rank outside
// the plan: ConfigError). A scenario with a precision change is refused (ConfigError): the runners
// move raw bytes and do not quantise.
std::string refit_plan_text(const RunPlan& plan, const std::vector<std::int32_t>& ranks = {});

// Writes the whole plan file to `path`, one rank's program at a time (the file may be larger than
// memory would hold as one JSON value), through `path`.partial renamed at the end: a failure (a
// ConfigError naming the file, out of memory included) leaves no partial file and `path` unchanged.
void write_refit_plan(const RunPlan& plan, const std::filesystem::path& path);

}  // namespace reshard::exec
