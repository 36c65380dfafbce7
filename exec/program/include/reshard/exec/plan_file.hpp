// The refit plan file (docs/execution.md, "Refit plan file"): a run's per-GPU programs
// (exec/program.hpp) expanded, with everything a runner needs and nothing it must compute again,
// so a process with no compiled reshard (the pure-Python runner reshard.torch, on a machine that
// only has PyTorch) runs the same schedule the C++ backends run. JSON, format
// `reshard-refit-plan-1`:
//
//   format, scenario, strategy (describe()), slots, steps, world_size (= GPUs of the run: process
//     rank r runs GPU gpus[r]), gpus,
//   model     name, architecture, hidden_size, num_attention_heads, num_key_value_heads, head_dim,
//             num_experts (what framework adapters need to unfuse a layout, reshard/adapters.py),
//   tensors   per tensor of the inventory: name, dtype, element_size, shape,
//   ops       per operation: id, step, chunks, chunk, bytes, offset (the wave its chunk 0 leaves
//             the sender in, within its step: exec::step_waves), hops [[from rank, to rank], ...]
//             (a plain transfer: one), depth per hop, kept (the ranks where its receive is kept
//             whole for a later send to pack from),
//   step_waves per step: its number of waves,
//   ranks     per rank: gpu, regions [{kind, tensor, box [[lo, hi], ...], op, bytes}], local copy
//             runs, sends and receives (the streams: op, peer rank, region, chain, chunk, bytes,
//             slots (0: kept), children ranks, hop, child_hops, copies), and pieces [[piece, side,
//             region, [[byte offset, bytes], ...]]] (where each piece it holds or needs lies in its
//             shard, row-major: what digest verification reads).
// A copy run is [src region, dst region, src offset, dst offset, bytes]; a stream's copies are in
// stream coordinates (exec/program.hpp). Ranks and regions are indices into these lists.
#pragma once

#include <string>

#include "reshard/exec/program.hpp"

namespace reshard::exec {

inline constexpr const char* kRefitPlanFormat = "reshard-refit-plan-1";

// The plan file's JSON text for a run plan (every GPU's program). A scenario with a precision
// change is refused (ConfigError): the runners move raw bytes and do not quantise.
std::string refit_plan_json(const RunPlan& plan);

}  // namespace reshard::exec
