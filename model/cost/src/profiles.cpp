// The named cost profiles (model/systems.hpp, cost_profiles) and CostParams::profile_named.
#include "reshard/model/errors.hpp"
#include "reshard/model/systems.hpp"

namespace reshard::model {

namespace {

// reshard's own engine: the hardware terms of CostParams.
//   NVLink: NCCL's usable 20.6 GB/s x 18 links = 371 of 450 GB/s (src/graph/topo.h) -> 0.82.
//   Network: 47 of 50 GB/s measured per NDR NIC (nccl-tests reports) -> 0.94.
CostParams reshard_cost() { return CostParams{}; }

// NCCL's latency model for a ring in its Simple protocol (src/graph/tuning.cc): 8.4 us per
// collective, 3.4 us per NVLink hop and 14 us per network hop of the ring.
CostParams nccl_cost() {
  CostParams p;
  p.profile = "nccl";
  p.step_barriers = false;
  p.per_op = Seconds{8.4e-6};
  p.chain_hop_latency[static_cast<std::size_t>(LinkKind::NVLink)] = Seconds{3.4e-6};
  p.chain_hop_latency[static_cast<std::size_t>(LinkKind::Network)] = Seconds{14e-6};
  return p;
}

const CostProfile kCostProfiles[] = {
    {"reshard", "reshard's engine: the links, step barriers between the staging steps", reshard_cost},
    {"nemo_rl", "NeMo RL's refit around NCCL, per tensor on each path, fitted to NVIDIA's four DGX H100 refit times; "
                "no step barriers (its refit runs no steps); the nemo_rl_* system profiles share it",
     nemo_rl_cost},
    {"miles", "miles' refit (slime's broadcast, Mooncake P2P); the slime and mooncake_p2p system profiles share it",
     miles_cost},
    {"nccl", "NCCL's own latency model for ring collectives (simulate --collective)", nccl_cost},
};

}  // namespace

std::span<const CostProfile> cost_profiles() { return kCostProfiles; }

CostParams CostParams::profile_named(const std::string& name) {
  for (const auto& p : kCostProfiles)
    if (name == p.name) return p.make();
  if (const SystemProfile* sp = find_system_profile(name)) return sp->cost;
  std::string names;
  for (const auto& p : kCostProfiles) names += (names.empty() ? "" : ", ") + std::string(p.name);
  throw ConfigError("", 0, "profile", "unknown profile '" + name + "'; expected " + names + " or a system's: " + system_profile_names());
}

}  // namespace reshard::model
