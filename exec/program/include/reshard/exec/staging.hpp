// Staging memory of the GPU backends: where each stream's region (a ring, or a kept receive's
// whole part, exec/program.hpp) lies in the one device arena of a process. Shards are resident for
// the whole run; a staging region is needed only in its op's step (model::op_steps), a kept
// receive from its step until the step of the last send here that packs from it. The backends run
// the steps one after another (the cuda backend joins its streams between steps, the nccl backend
// runs on one stream), so two regions share memory when one's last step precedes the other's
// first: the arena of a GPU is then its largest step, as model::staging_memory predicts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reshard/exec/program.hpp"

namespace reshard::exec::detail {

struct StagingRequest {
  std::int64_t bytes = 0;
  std::int64_t first = 0, last = 0;  // positions, inclusive
};

struct StagingPlan {
  std::vector<std::int64_t> offset;  // per request, from the start of the staging area
  std::int64_t bytes = 0;            // the staging area's size (high-water mark)
  std::vector<std::int64_t> fences;  // positions before which all earlier work has finished, ascending
};

// Lays out the requests (sizes rounded up to 256 bytes), reusing the memory of regions no longer
// live: a request lives from its first position to its last, inclusive. `budget` bounds the plain
// bump layout before reuse; `ordered`: work at a later position runs after work at an earlier one,
// so no fence is needed (else fences are placed where reuse needs them). Never fails: a plan larger
// than the budget is returned for the caller to refuse.
StagingPlan plan_staging(const std::vector<StagingRequest>& requests, std::int64_t budget, bool ordered);

// The requests of a process's programs, positions = steps: one per staging region, living in its
// op's step, a kept receive until the last step here that packs from it. request_of[program][region]
// is the request's index, -1 for a shard.
std::vector<StagingRequest> staging_requests(const RunPlan& plan, const std::vector<GpuProgram>& progs,
                                             std::vector<std::vector<std::int64_t>>& request_of);

// Per program: the most staging bytes (256-byte rounded) its requests hold in one step, what it
// holds at most under the layout (the GPU backends' Measurement::staging).
std::vector<std::int64_t> staging_per_program(const std::vector<StagingRequest>& requests,
                                              const std::vector<std::vector<std::int64_t>>& request_of);

}  // namespace reshard::exec::detail
