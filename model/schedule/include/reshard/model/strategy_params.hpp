// A strategy and its parameters: the value a Schedule records (Schedule::params), the line the
// tuner prints and the CLI reads ("hybrid chunk=1MiB max_chain=2 relay_ingress"), its JSON. Two
// tables hold every fact: kStrategies (each strategy's name, stable id and what it takes) and
// strategy_parameters() (each parameter's key, kind and the trait that allows it), which describe,
// parse, the usage in errors and the JSON read; docs/strategies.md's table gives each one's
// meaning, and a test holds the two to the same rows. The builders: model/strategies.hpp.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "reshard/model/checked.hpp"
#include "reshard/model/defaults.hpp"
#include "reshard/model/units.hpp"

namespace reshard::model {

// The named strategies (model/strategies.hpp), in the order compare lists them; one table
// (strategy_params.cpp, kStrategies) holds each one's name, its stable id and what it takes. A binary schedule file
// stores the id, not the position here (docs/schedule-format.md): a new strategy may go anywhere in
// the enum and takes an id no strategy has had (pinned by ScheduleFileFormat.StrategyIdsArePinned).
enum class Strategy : std::uint8_t { GatherBroadcast, Direct, DomainGrouped, DomainChain, Hybrid, NemoRlReshard };

// What a strategy takes in its line (describe() writes it, parse_strategy() accepts it) and how the
// tuner treats it.
struct StrategyTraits {
  Strategy strategy;
  const char* name;
  std::uint8_t id;  // stable: what a binary schedule file stores
  bool chunk;      // builds chain ops: takes chunk=SIZE
  bool channels;   // broadcast rings per bucket: channels=N
  bool max_chain;  // domains per chain: max_chain=N
  bool bucket;     // broadcast buckets: bucket=SIZE
  bool relays;     // relay_ingress, rail_blind
  bool egress;     // relay_egress (every strategy with relays; gather_broadcast: its rings leave
                   // through the head's NVLink peers among the source GPUs)
  bool tuned;      // the tuner's coordinate descent moves its parameters
};
const StrategyTraits& traits(Strategy s);
const char* to_string(Strategy s);
std::ostream& operator<<(std::ostream& out, Strategy s);
void to_json(nlohmann::json& j, Strategy s);  // its name
const std::vector<Strategy>& all_strategies();  // every named strategy (not "auto"), in enum order
// The strategy called `name`; throws PlanError listing the names for anything else.
Strategy strategy_named(const std::string& name);
// The strategy stored as `id` (StrategyTraits::id); nullopt for an id no strategy has.
std::optional<Strategy> strategy_with_id(std::uint8_t id);

// Parts one buffer may be cut into (an op's `parts`), and the largest count a strategy line takes
// (channels=N, max_chain=N): gather_broadcast cuts a bucket into one part per channel.
inline constexpr std::int32_t kMaxParts = 1 << 20;

struct StrategyParams {
  Strategy strategy = Strategy::DomainChain;
  Bytes chunk = kDefaultChunk;       // the chunk chain ops pipeline in (model/defaults.hpp)
  std::int32_t channels = 0;         // broadcast rings per bucket (gather_broadcast, nemo_rl_reshard);
                                     // 0: one per GPU of a destination domain (a ring per rail, as
                                     // NCCL's channels)
  std::int32_t max_chain = 8;        // domains per chain; longer lists split into chains fed by other holders
  // The broadcast bucket size (gather_broadcast, nemo_rl_reshard). 0: from the head's staging
  // budget, as NeMo RL sizes its two buffers from the GPU's memory: half of what the budget leaves
  // beside the head's broadcast rings (kDefaultBucket without a budget); a size caps that. The
  // schedule does not hold a head to two buckets in flight: bucket k's gathers wait for bucket
  // k - 1's, its broadcast for its gathers, and a channel's broadcasts leave in bucket order.
  Bytes bucket{0};
  bool rail_aligned_ingress = true;  // prefer ingress GPUs on the holder's rail
  bool relay_ingress = false;        // any GPU of a domain may be its ingress, needed there or not
  bool relay_egress = false;         // any GPU of a holder's domain may send (fed over NVLink);
                                     // gather_broadcast: ring c leaves through the head's c-th NVLink
                                     // peer among the source GPUs (verl's multi_sender relays)
  bool operator==(const StrategyParams&) const = default;
};

// One parameter of a strategy line. `kind`: a size (KEY=SIZE), a count (KEY=N in 1..kMaxParts) or
// a flag (KEY alone, which sets `flag` to `flag_value`). `allowed`: the strategy trait that lets a
// strategy take it. describe() writes a size or count unless `omit_zero` and it is 0, a flag when
// it is set. `json`: its name in a schedule's "params" object.
struct StrategyParameter {
  enum class Kind : std::uint8_t { Size, Count, Flag } kind;
  const char* key;
  const char* json;
  bool StrategyTraits::*allowed;
  Bytes StrategyParams::*size = nullptr;
  std::int32_t StrategyParams::*count = nullptr;
  bool StrategyParams::*flag = nullptr;
  bool flag_value = true;
  bool omit_zero = false;
};
// Every parameter, in the order a line writes them (chunk, channels, max_chain, bucket,
// relay_ingress, relay_egress, rail_blind).
std::span<const StrategyParameter> strategy_parameters();

const std::vector<std::string>& strategy_names();  // the names of all_strategies(), in order

// A strategy with its parameters in one line, as the tuner prints it and the CLI reads it:
// "NAME [chunk=SIZE] [channels=N] [max_chain=N] [bucket=SIZE] [relay_ingress] [relay_egress]
// [rail_blind]" (sizes with a unit: 512KiB, 1.6GB).
// describe() writes only what the strategy uses; parse_strategy() starts from the defaults and
// throws PlanError naming the token it cannot read or the name it does not know.
std::string describe(const StrategyParams& p);
StrategyParams parse_strategy(const std::string& spec);
// Every field of a strategy's parameters (describe() writes only those it uses), as a schedule's
// "params" object holds them: strategy, chunk_bytes, channels, max_chain, bucket_bytes, rail_blind,
// relay_ingress, relay_egress. strategy_params_from_json reads them back (ConfigError at "params").
nlohmann::json to_json(const StrategyParams& p);
StrategyParams strategy_params_from_json(const nlohmann::json& j);
// The same, errors naming `where` (a schedule's file and its "params" path).
StrategyParams strategy_params_from_json(const nlohmann::json& j, const checked::JsonWhere& where);

}  // namespace reshard::model
