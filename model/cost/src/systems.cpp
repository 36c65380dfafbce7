#include "reshard/model/systems.hpp"

#include "reshard/model/units.hpp"

namespace reshard::model {

namespace {

// The three constants fitted to measured refit times, on the calibration subset: NVIDIA's four
// published NeMo RL refit times on DGX H100 (params/nemo_rl-published.csv; rows nrl-anchor-* of
// params/published-refit.csv), by
//   reshard calibrate params/nemo_rl-published.csv --profile nemo_rl \
//       --fit per_tensor,per_broadcast_tensor,copy_passes -o params/nemo_rl.yaml
// (docs/calibration.md; rms relative error 4.4 %, in-sample). NeMo RL's host work overlaps its
// GPUs' (host_overlaps): each time is the larger of the two sides. Costs per tensor and per byte at the
// GPU's memory bandwidth, not per bucket or per stage, so that they carry to a GPU with another
// memory size (NeMo RL's bucket is 2 % of it) and another memory bandwidth.
constexpr double kPythonPerTensor = 172.938e-6;  // s: per tensor on the packed-broadcast path
constexpr double kCallPerTensor = 103.427e-6;   // s: per call of a per-tensor transfer engine
constexpr double kNemoRlCopyPasses = 14.1376;    // passes over the bytes each GPU sends and receives

// The two constants of the `miles` cost terms (slime's broadcast and Mooncake P2P, as miles runs
// them), fitted on its calibration subset, miles' Qwen3-30B-A3B pair on DGX H100
// (params/miles-published.csv), by
//   reshard calibrate params/miles-published.csv --profile miles --fit per_tensor,per_broadcast_tensor
// Two constants on two points: each rests on one measurement.
constexpr double kMilesBroadcastPerTensor = 72.6071e-6; // s: per tensor of slime's broadcast path
constexpr double kMilesP2pPerTensor = 105.834e-6;       // s: per tensor of the P2P path

// A CUDA launch from the host (kernel or copy-engine memcpy), the figure NCCL's base latency is built on.
constexpr double kLaunch = 5.0e-6;

std::string micros(double s) { return format(Seconds{s}); }

CostParams base(const std::string& name) {
  CostParams p;  // the reshard profile's hardware terms: link efficiencies, per_op
  p.profile = name;
  p.step_barriers = false;  // none of these systems runs reshard's steps
  return p;
}

ProfileConstant fitted_python_per_tensor(const char* meaning) {
  return {"per_broadcast_tensor", micros(kPythonPerTensor), meaning,
          "fitted with per_tensor and copy_passes on the calibration subset: NeMo RL's four DGX H100 refit times (nrl-anchor-*)", true};
}

// Stays whole: a table, one block per system profile, each with its sources; nothing to split.
std::vector<SystemProfile> make_profiles() {
  std::vector<SystemProfile> v;
  {
    SystemProfile s;
    s.name = "nemo_rl_broadcast";
    s.system = "NeMo RL, packed broadcast (refit over NCCL, 2025-2026 main)";
    s.strategy = "gather_broadcast";
    s.schedule =
        "each training PP stage's head gathers whole tensors and broadcasts them in buckets of "
        "min(2 % of GPU memory, 5 GiB) (two alternating) over rings through every inference GPU. NeMo RL "
        "broadcasts from global rank 0 alone after Megatron-Bridge's export gathers every parameter there; "
        "the per-stage heads are reshard's gather_broadcast, faster on the wire than one root";
    s.cost = nemo_rl_cost();
    s.constants = {
        fitted_python_per_tensor("per tensor: Megatron-Bridge's export on the training side (PP broadcast, TP "
                                 "all-gather, EP gather, HF conversion) and vLLM's Python loader on the inference side"),
        {"host_overlaps", "true", "the Python loop's per-tensor work runs while the GPUs broadcast (two buffers on "
         "side streams): the time is the larger of the host's and the GPUs'", "nemo_rl/utils/packed_tensor.py (NRL_REFIT_NUM_BUFFERS=2)", false},
        {"per_tensor", micros(kCallPerTensor), "per call of the nccl_reshard path (unused by this path)",
         "fitted with per_broadcast_tensor and copy_passes (nrl-anchor-*)", true},
        {"copy_passes", "14.1", "passes over the bytes each GPU sends and receives at its memory bandwidth: export gathers, "
         "torch.cat at the root, clones and the loader's copy at each receiver (the source shows about 4; the fit "
         "also absorbs what else scales with the bytes on the GPUs)",
         "fitted with per_tensor and per_broadcast_tensor (nrl-anchor-*)", true},
    };
    v.push_back(s);
  }
  {
    SystemProfile s;
    s.name = "nemo_rl_nccl_reshard";
    s.system = "NeMo RL, refit_transport: nccl_reshard (main after PR #2971, 2026)";
    s.strategy = "nemo_rl_reshard";
    s.schedule =
        "FFN and expert weights point to point, one transfer call per parameter over one communicator per "
        "training PP stage, the inference side spreading the stages over two streams; the rest by the "
        "packed broadcast";
    s.cost = nemo_rl_cost();
    s.constants = {
        {"per_tensor", micros(kCallPerTensor), "per transfer call (one per FFN parameter): its Python and launch",
         "fitted with per_broadcast_tensor and copy_passes on NeMo RL's four DGX H100 refit times (nrl-anchor-*)", true},
        fitted_python_per_tensor("per tensor of the packed broadcast that carries the non-FFN weights"),
        {"tensor_streams", "2", "the inference side runs the PP stages' calls on two streams (NRL_REFIT_NUM_STREAMS)",
         "docs/design-docs/nccl-reshard-refit.md", false},
        {"host_overlaps", "true", "the calls are issued while earlier ones transfer", "docs/design-docs/nccl-reshard-refit.md", false},
        {"copy_passes", "14.1", "passes over the bytes each GPU sends and receives (shared with the packed broadcast)",
         "fitted with per_tensor and per_broadcast_tensor (nrl-anchor-*)", true},
    };
    v.push_back(s);
  }
  for (bool hierarchical : {false, true}) {
    SystemProfile s;
    s.name = hierarchical ? "nccl_m2n_hierarchical" : "nccl_m2n_direct";
    s.system = std::string("NVIDIA nccl-extensions nccl_m2n, ") + (hierarchical ? "hierarchical ring" : "direct P2P") +
               " (reshard_model_bench, 2026)";
    s.strategy = hierarchical ? "domain_chain chunk=256KiB" : "direct";
    s.schedule = hierarchical
                     ? "one call per parameter: the sources put once into each destination NVLink domain's leader, "
                       "which forwards to the next domain (a ring) and fans out over NVLink to its domain; PACK "
                       "plans travel store-and-forward per CTA slice, which the chain's pipelined fill does not model"
                     : "one call per parameter: every source GPU puts its slices straight into every destination GPU "
                       "that needs them (GIN puts, no forwarding)";
    s.cost = base(s.name);
    s.cost.per_tensor = Seconds{3 * kLaunch};
    s.cost.barriers_per_tensor = 2;
    s.cost.copy_passes = 1;
    s.constants = {
        {"per_tensor", micros(3 * kLaunch), "per call: a kernel launch and two copy-engine memcpy launches (pack, unpack)",
         "3 CUDA launches of about 5 us (nccl_m2n/src/reshard_user_window.cu launches them per call)", false},
        {"barriers_per_tensor", "2", "two world-wide GIN barriers per call, the last fenced; each T_barrier from the topology",
         "nccl_m2n/src/reshard_user_window.cu", false},
        {"copy_passes", "1", "copy-engine pack before and unpack after the transfer (an extra HBM read and write at each end)",
         "nccl_m2n/src/reshard_user_window.cu (cudaMemcpy3DAsync)", false},
    };
    v.push_back(s);
  }
  {
    SystemProfile s;
    s.name = "slime";
    s.system = "slime / miles, NCCL broadcast weight update (THUDM/slime, radixark/miles, 2025-2026)";
    s.strategy = "gather_broadcast channels=1 bucket=512MiB";
    s.schedule =
        "one root per training PP stage (its DP = TP = 0 rank) broadcasts to every SGLang rank in a group "
        "per stage, in buckets of 512 MiB, one NCCL broadcast per tensor, experts after an EP all-gather. The "
        "root is its node's only GPU in the group, so it sends through its one NIC: one ring (channels=1), "
        "every stage's ring entering each SGLang node on the same rail";
    s.cost = miles_cost();
    s.constants = {
        {"per_broadcast_tensor", micros(kMilesBroadcastPerTensor),
         "per tensor: the Megatron-to-HF conversion, one NCCL broadcast call and SGLang's loader",
         "fitted on miles-qwen3-30b-nccl (params/miles-published.csv)", true},
    };
    v.push_back(s);
  }
  {
    SystemProfile s;
    s.name = "mooncake_p2p";
    s.system = "miles, Mooncake P2P weight transfer (radixark/miles #755, 2026)";
    s.strategy = "direct";
    s.schedule =
        "after the EP all-gather every training rank is a source and writes its re-sharded slices with "
        "one-sided RDMA into the registered SGLang memory that needs them (from a pinned CPU replica, whose "
        "PCIe copy is not modelled)";
    s.cost = miles_cost();
    s.constants = {
        {"per_tensor", micros(kMilesP2pPerTensor),
         "per tensor: the conversion and re-sharding of each tensor on the training side, its registration and write",
         "fitted on miles-qwen3-30b-p2p (params/miles-published.csv)", true},
    };
    v.push_back(s);
  }
  for (bool multi_sender : {false, true}) {
    SystemProfile s;
    s.name = multi_sender ? "verl_multi_sender" : "verl";
    s.system = std::string("verl, NCCL checkpoint engine") + (multi_sender ? " with multi_sender" : "") +
               " (verl/checkpoint_engine, 2026)";
    s.strategy = multi_sender ? "gather_broadcast" : "gather_broadcast channels=1";
    s.schedule = multi_sender
                     ? "the actor's rank 0 gathers each bucket and its node-local peers relay it (multi_sender), so "
                       "the broadcast leaves through every NIC of its node: a ring per rail (gather_broadcast's "
                       "default channels); double-buffered, a synchronize per bucket, loads over CUDA IPC"
                     : "one sender (the actor's rank 0) gathers and broadcasts buckets, double-buffered, to every "
                       "rollout rank, which loads them over CUDA IPC; a synchronize per bucket. The sender reaches "
                       "one NIC (verl #7167, #7291): one ring (channels=1)";
    s.cost = base(s.name);
    s.cost.per_broadcast_tensor = Seconds{kPythonPerTensor};
    s.cost.copy_passes = 1;
    s.constants = {
        {"per_broadcast_tensor", micros(kPythonPerTensor), "per tensor: the rollout engine's Python loader",
         "NeMo RL's fitted per-tensor cost (nrl-anchor-*), carried over", false},
        {"copy_passes", "1", "each bucket packed at the sender, unpacked at the receiver", "verl/checkpoint_engine", false},
    };
    v.push_back(s);
  }
  return v;
}

}  // namespace

CostParams miles_cost() {
  CostParams p = base("miles");
  p.per_tensor = Seconds{kMilesP2pPerTensor};
  p.per_broadcast_tensor = Seconds{kMilesBroadcastPerTensor};
  return p;
}

CostParams nemo_rl_cost() {
  CostParams p = base("nemo_rl");
  p.per_tensor = Seconds{kCallPerTensor};
  p.per_broadcast_tensor = Seconds{kPythonPerTensor};
  p.tensor_streams = 2;
  p.copy_passes = kNemoRlCopyPasses;
  p.host_overlaps = true;  // a Python loop issuing asynchronous NCCL calls on side streams
  return p;
}

const std::vector<SystemProfile>& system_profiles() {
  static const std::vector<SystemProfile> profiles = make_profiles();
  return profiles;
}

const SystemProfile* find_system_profile(const std::string& name) {
  for (const auto& p : system_profiles())
    if (p.name == name) return &p;
  return nullptr;
}

std::string system_profile_names() {
  std::string s;
  for (const auto& p : system_profiles()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

}  // namespace reshard::model
