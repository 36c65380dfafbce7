// The defaults that several stages share (the planner, the strategies, the commands, the Python
// module, the executors), each with the reason for its value: change one here and all of them
// follow. A default only one place uses lives beside it (the tuner's budgets in TuneOptions, the
// scenario's memory rule in scenario.hpp, the simulator's tolerances in sim/src/tolerances.hpp).
#pragma once

#include <cstdint>

#include "reshard/model/units.hpp"

namespace reshard::model {

// The implementation profile (CostParams::profile_named, model/cost.hpp) a command, the Python
// module and the executors estimate with when none is named: this project's own executor.
inline constexpr const char* kDefaultProfile = "reshard";

// The chunk chain ops and transfers pipeline in: NCCL's Simple protocol, a 4 MiB buffer in 8 steps
// of 512 KiB (StrategyParams::chunk, Chain::chunk, CollectiveSpec::chunk, `--chunk`).
inline constexpr Bytes kDefaultChunk{512 << 10};

// NCCL's in-flight slots per connection (NCCL_STEPS): by default a hop keeps this many chunks in
// flight (Schedule::slots), so a chunk's latency is hidden behind the transfer of the others
// (model/chain.hpp). kMinSlots: the fewest an executor works with (a GPU inside a chain forwards
// chunk k from one slot while chunk k + 1 arrives in the other).
inline constexpr std::int32_t kChainSlots = 8;
inline constexpr std::int32_t kMinSlots = 2;
inline constexpr std::int32_t kMaxSlots = 1 << 10;  // the most a schedule file may name

// gather_broadcast's bucket without a staging budget: NeMo RL's min(2 % of GPU memory, 5 GiB) on an
// 80 GB H100.
inline constexpr Bytes kDefaultBucket{1'600'000'000};

// The domain strategies' stripe: a GPU's fair share of network ingress cut into kStripesPerShare
// stripes, so the greedy least-loaded ingress choice ends within about 1/32 of a share of even;
// never below kMinStripe (4 KiB), where a stripe's per-op cost outweighs its balance.
inline constexpr double kStripesPerShare = 32;
inline constexpr std::int64_t kMinStripe = 4 << 10;

// A ring broadcast (gather_broadcast, nemo_rl_reshard) is buckets x channels chain ops; past this
// many the buckets grow until the schedule fits, which keeps a schedule of a trillion-parameter
// model in memory and its estimate in seconds.
inline constexpr double kMaxBroadcastOps = 4e6;

}  // namespace reshard::model
