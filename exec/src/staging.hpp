// Staging memory of the GPU backends: where each send and receive region lies in the one device
// arena of a process. Shards are resident for the whole run; staging regions are needed only
// while their operation runs and until the last operation that packs from them (a forward).
//
// The work is enqueued in an order of positions (the cuda backend: op ids; the nccl backend:
// steps). A region is live from its first position to its last, inclusive. Two regions share
// memory only if one's last position precedes the other's first, and (unless the work runs in
// enqueue order, as on the nccl backend's one stream) a fence lies between them: the cuda backend
// makes every stream wait for all work enqueued before a fence. Fences are placed only when the
// budget is exhausted: a run that fits without reuse gets the plain bump layout and no fence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reshard/exec/executor.hpp"

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

// Lays out the requests (sizes rounded up to 256 bytes) within `budget` bytes if it can, reusing
// the memory of regions no longer live; `ordered`: work at a later position runs after work at an
// earlier one, so no fence is needed. Never fails: a plan larger than the budget is returned for
// the caller to refuse.
StagingPlan plan_staging(const std::vector<StagingRequest>& requests, std::int64_t budget, bool ordered);

// The requests of a process's programs: one per send and receive region. request_of[program][region]
// is the request's index, -1 for a shard.
//   by_op (the cuda backend, which enqueues op by op): a region lives at its op's id, and a receive
//     region until the last op that packs from it.
//   in_waves (the nccl backend): positions are waves numbered across the steps (step_waves of the
//     ops these programs take part in). A plain op's regions live in wave 0 of its step (packed
//     before it, unpacked after it); a chain root's from the wave its first chunk leaves to the one
//     its last chunk leaves; a receiver's from its first chunk's arrival to its last's, one wave
//     more where it forwards. A receive region lives on until the wave of the last op that packs
//     from it (a chain root packs before its first chunk's wave, a plain op before wave 0).
std::vector<StagingRequest> staging_requests_by_op(const std::vector<GpuProgram>& progs,
                                                   std::vector<std::vector<std::int64_t>>& request_of);
std::vector<StagingRequest> staging_requests_in_waves(const RunPlan& plan, const std::vector<GpuProgram>& progs,
                                                      std::vector<std::vector<std::int64_t>>& request_of);

}  // namespace reshard::exec::detail
