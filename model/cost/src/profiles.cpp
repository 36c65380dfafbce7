// The named cost profiles (model/systems.hpp, cost_profiles) and CostParams::profile_named.
#include "reshard/model/errors.hpp"
#include "reshard/model/systems.hpp"
#include "reshard/model/units.hpp"

namespace reshard::model {

namespace {

// reshard's own engine as a deployment runs it (`reshard exec --backend nccl`, one process per GPU):
// the hardware terms of CostParams and what the engine itself costs.
//   NVLink: NCCL's usable 20.6 GB/s x 18 links = 371 of 450 GB/s (src/graph/topo.h) -> 0.82.
//   Network: 47 of 50 GB/s measured per NDR NIC (nccl-tests reports) -> 0.94.
//   engine_call: the host's time per CUDA call, the GPU check's device profile
//     (params/gpu-check-h200.yaml: fitted to one run of the per-chunk cuda engine on an H200,
//     2.3096 us, docs/validation.md). The nccl backend's calls are counted from its source
//     (T_issue, cost.hpp: per window and hop, per wave); its NCCL sends and receives are taken at
//     the same cost as the CUDA calls the check measured.
//   copy_passes 1: the nccl backend packs every window it sends into a staging slot and unpacks
//     every window it receives (list walks on the stream its NCCL calls use, so the passes add).
//   host_overlaps: the host issues asynchronously; its calls add only where they outlast the GPUs.
constexpr double kEngineCall = 2.3096e-6;  // s

CostParams reshard_cost() {
  CostParams p;
  p.engine_call = Seconds{kEngineCall};
  p.copy_passes = 1;
  p.host_overlaps = true;
  return p;
}

std::vector<ProfileConstant> reshard_constants() {
  const CostParams p = reshard_cost();
  return {
      {"efficiency", "nvlink 0.82, network 0.94", "achievable fraction of a link's line rate",
       "NVLink: NCCL's usable 20.6 GB/s x 18 links of 450 GB/s (src/graph/topo.h); network: 47 of 50 GB/s per NDR NIC "
       "(nccl-tests reports)", false, "", ""},
      {"per_op", format(p.per_op), "per transfer: a small-message send/receive between two GPUs beyond its route's latency",
       "nccl-tests reports (about 3 us over NVLink, 0.6 us of it the route)", false, "", ""},
      {"engine_call", format(p.engine_call),
       "the host's time per call the engine issues (kernel launch, NCCL send or receive, group start or end, event)",
       "the GPU check: fitted to one run of the per-chunk cuda engine on one H200 (params/gpu-check-h200.yaml, "
       "docs/validation.md); NCCL's send and receive assumed to cost as much",
       true, "", ""},
      {"copy_passes", "1", "the pack of every chunk sent and the unpack of every chunk received, on the NCCL calls' stream",
       "exec/backends/src/nccl_backend.cpp (run_step: a pack and an unpack list per wave)", false, "", ""},
      {"host_overlaps", "true", "the host issues its calls asynchronously: they add only beyond the GPUs' time",
       "exec/backends/src/nccl_backend.cpp (one stream, waits per step)", false, "", ""},
      {"step_barriers", "true", "the staging steps run one after another on every GPU", "exec/backends/src/nccl_backend.cpp (run_step)",
       false, "", ""},
  };
}

std::vector<ProfileConstant> no_constants() { return {}; }

// reshard's schedules on an engine that costs nothing beyond the links and the step barriers: the
// schedule's own quality, the lower bound's peer (what `reshard` adds to it is the engine's).
CostParams links_cost() {
  CostParams p;
  p.profile = "links";
  return p;
}

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
    {"reshard", "reshard's engine over NCCL (the nccl backend): the links, step barriers between the staging steps, "
                "the calls it issues per window of chunks and per wave, its packs and unpacks",
     reshard_cost, reshard_constants},
    {"links", "reshard's schedules on an engine that costs nothing beyond the links and the step barriers: the "
              "schedule's own quality against the lower bound",
     links_cost, no_constants},
    {"nemo_rl", "NeMo RL's refit around NCCL, per tensor on each path, fitted to NVIDIA's four DGX H100 refit times; "
                "no step barriers (its refit runs no steps); the nemo_rl_* system profiles share it",
     nemo_rl_cost, no_constants},
    {"miles", "miles' refit (slime's broadcast, Mooncake P2P); the slime and mooncake_p2p system profiles share it",
     miles_cost, no_constants},
    {"nccl", "NCCL's own latency model for ring collectives (simulate --collective)", nccl_cost, no_constants},
};

}  // namespace

std::span<const CostProfile> cost_profiles() { return kCostProfiles; }

const CostProfile* find_cost_profile(const std::string& name) {
  for (const auto& p : kCostProfiles)
    if (name == p.name) return &p;
  return nullptr;
}

CostParams CostParams::profile_named(const std::string& name) {
  if (const CostProfile* p = find_cost_profile(name)) return p->make();
  if (const SystemProfile* sp = find_system_profile(name)) return sp->cost;
  std::string names;
  for (const auto& p : kCostProfiles) names += (names.empty() ? "" : ", ") + std::string(p.name);
  throw ConfigError("", 0, "profile", "unknown profile '" + name + "'; expected " + names + " or a system's: " + system_profile_names());
}

}  // namespace reshard::model
