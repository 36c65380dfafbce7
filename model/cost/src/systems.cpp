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

// checkpoint-engine's two constants, fitted on its calibration subset (params/checkpoint-engine-published.csv:
// the broadcast update of Qwen3-235B on 8 H800 and of DeepSeek-V3.1 on 16 H20), by
//   reshard calibrate params/checkpoint-engine-published.csv --profile checkpoint_engine
//       --fit per_broadcast_tensor,per_bucket
// and the P2P update's per-bucket cost on one P2P row (params/checkpoint-engine-p2p-published.csv).
constexpr double kCkptLoadPerTensor = 89.4e-6; // s: the vLLM worker's load per tensor
constexpr double kCkptPerBucket = 11.8e-3;    // s: per broadcast bucket
constexpr double kCkptP2pPerBucket = 25.4e-3; // s: per bucket of the P2P update

// The Python fallback of NeMo RL's nccl_reshard (PR #2971, xferdtensor_python_impl): its per-parameter
// cost, fitted on one row of the PR's fallback table (params/nemo_rl-fallback-published.csv), by
//   reshard calibrate params/nemo_rl-fallback-published.csv --profile nemo_rl_nccl_reshard_python_fallback --fit per_tensor
constexpr double kFallbackPerTensor = 37.9e-6; // s: per parameter, planned and moved in Python

// NeMo RL's pre-merge NCCL-Xfer refit (PR #2808): per call and per GPU a call spans, fitted on two
// rows of the PR's table (params/nemo_rl-xfer-published.csv), by
//   reshard calibrate params/nemo_rl-xfer-published.csv --profile nemo_rl_nccl_xfer_premerge --fit per_tensor,per_call_rank
constexpr double kXferPerCall = 7.16e-6;     // s: per call
constexpr double kXferPerCallRank = 638e-9; // s: per call and per GPU it spans

// verl's per-tensor cost, fitted on its calibration subset, the NCCL row of verl's checkpoint-engine
// benchmark (params/verl-published.csv), by
//   reshard calibrate params/verl-published.csv --profile verl --fit per_broadcast_tensor
// One constant on one point; the engines' other rows are predictions.
constexpr double kVerlPerTensor = 371e-6; // s: the actor's generator per tensor

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
          "fitted with per_tensor and copy_passes on the calibration subset: NeMo RL's four DGX H100 refit times (nrl-anchor-*)", true, "nemo_rl", ""};
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
         "fitted with per_broadcast_tensor and copy_passes (nrl-anchor-*)", true, "nemo_rl", ""},
        {"copy_passes", "14.1", "passes over the bytes each GPU sends and receives at its memory bandwidth: export gathers, "
         "torch.cat at the root, clones and the loader's copy at each receiver (the source shows about 4; the fit "
         "also absorbs what else scales with the bytes on the GPUs)",
         "fitted with per_tensor and per_broadcast_tensor (nrl-anchor-*)", true, "nemo_rl", ""},
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
         "fitted with per_broadcast_tensor and copy_passes on NeMo RL's four DGX H100 refit times (nrl-anchor-*)", true, "nemo_rl", ""},
        fitted_python_per_tensor("per tensor of the packed broadcast that carries the non-FFN weights"),
        {"tensor_streams", "2", "the inference side runs the PP stages' calls on two streams (NRL_REFIT_NUM_STREAMS)",
         "docs/design-docs/nccl-reshard-refit.md", false},
        {"host_overlaps", "true", "the calls are issued while earlier ones transfer", "docs/design-docs/nccl-reshard-refit.md", false},
        {"copy_passes", "14.1", "passes over the bytes each GPU sends and receives (shared with the packed broadcast)",
         "fitted with per_tensor and per_broadcast_tensor (nrl-anchor-*)", true, "nemo_rl", ""},
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
         "fitted on miles-qwen3-30b-nccl (params/miles-published.csv)", true, "miles", ""},
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
         "fitted on miles-qwen3-30b-p2p (params/miles-published.csv)", true, "miles", ""},
    };
    v.push_back(s);
  }
  // verl's checkpoint engines (verl/checkpoint_engine): the actor's generator yields one full tensor
  // at a time (FSDP full_tensor, a collective over the actors), packed into double buffers of
  // update_weights_bucket_megabytes; they differ in how a bucket reaches the rollout ranks.
  struct VerlEngine {
    const char* name;
    const char* system;
    const char* strategy;
    bool overlaps;
    const char* schedule;
  };
  const VerlEngine verl_engines[] = {
      {"verl", "verl, NCCL checkpoint engine, one sender (verl/checkpoint_engine/nccl_checkpoint_engine.py, 2026)",
       "gather_broadcast channels=1", true,
       "one sender (the actor's rank 0) fills a bucket while the previous one is broadcast (pipelined: a synchronize "
       "per bucket) to every rollout rank, which loads it over CUDA IPC. The sender reaches one NIC (verl #7167): one "
       "ring (channels=1), whose other hops leave each node on another rail"},
      {"verl_multi_sender", "verl, NCCL checkpoint engine with multi_sender (verl/checkpoint_engine/nccl_checkpoint_engine.py, 2026)",
       "gather_broadcast relay_egress", false,
       "the actor's rank 0 and its node-local actor peers join the broadcast group as relays "
       "(NCCLCheckpointEngine._multi_sender_ranks): ring c crosses NVLink to the c-th of them and leaves through its NIC, "
       "a ring per rail. With more than one sender the fill is not pipelined (send_weights: pipelined = num_senders == 1): "
       "each bucket's broadcast is waited for before the next is filled"},
      {"verl_nixl", "verl, NIXL checkpoint engine (verl/checkpoint_engine/nixl_checkpoint_engine.py, 2026)",
       "gather_broadcast channels=1", true,
       "the actor's rank 0 fills double buffers; the rollout ranks form a chain (NixlCheckpointEngine.build_topology: "
       "each reads every bucket, one-sided, from its predecessor and serves it to its successor): one ring, as the "
       "NCCL engine's, forwarding whole buckets"},
      {"verl_mooncake", "verl, Mooncake checkpoint engine (verl/checkpoint_engine/mooncake_checkpoint_engine.py, 2026)",
       "gather_broadcast channels=1", true,
       "as the NIXL engine: a chain of RDMA reads over the Mooncake transfer engine, each rollout rank reading every "
       "bucket from its predecessor"},
  };
  for (const VerlEngine& e : verl_engines) {
    SystemProfile s;
    s.name = e.name;
    s.system = e.system;
    s.strategy = e.strategy;
    s.schedule = e.schedule;
    s.cost = base(s.name);
    s.cost.per_broadcast_tensor = Seconds{kVerlPerTensor};
    s.cost.copy_passes = 1;
    s.cost.host_overlaps = e.overlaps;
    const bool own = s.name == "verl";
    s.constants = {
        {"per_broadcast_tensor", micros(kVerlPerTensor),
         "per tensor: the actor's generator (FSDP full_tensor, a collective per parameter, and the copy into the bucket) "
         "and the rollout side's unpacking",
         own ? "fitted on verl-ce-h100-nccl (params/verl-published.csv)" : "verl's, carried (fitted on verl-ce-h100-nccl)",
         own, "verl"},
        {"copy_passes", "1", "each bucket packed at the sender, unpacked at the receiver", "verl/checkpoint_engine", false},
        {"host_overlaps", e.overlaps ? "true" : "false",
         e.overlaps ? "the next bucket is filled while the previous one travels (two buffers)"
                    : "each bucket's broadcast is waited for before the next is filled",
         "verl/checkpoint_engine, send_weights", false},
    };
    v.push_back(s);
  }
  {
    SystemProfile s;
    s.name = "nemo_rl_nccl_xfer_premerge";
    s.system = "NeMo RL, the NCCL-Xfer refit before it merged (PR #2413 / #2808, 2026-05/06)";
    s.strategy = "direct";
    s.schedule =
        "every parameter through one NCCL-Xfer call (PR #2971 later narrowed the same feature to the FFN weights): "
        "each call plans the parameter's moves between the source and destination meshes and moves them between "
        "the GPUs that hold and need each slice, one call after another";
    s.cost = base(s.name);
    s.cost.per_tensor = Seconds{kXferPerCall};
    s.cost.per_call_rank = Seconds{kXferPerCallRank};
    s.constants = {
        {"per_tensor", micros(kXferPerCall), "per call: its launch and Python",
         "fitted with per_call_rank on nrl-pr2808-q30b and nrl-pr2808-dsv3 (params/nemo_rl-xfer-published.csv)", true,
         "nemo_rl_xfer"},
        {"per_call_rank", micros(kXferPerCallRank),
         "per call and per GPU it spans (the GPUs that send or receive a part of the parameter): the call's plan and "
         "signalling over both meshes",
         "fitted with per_tensor on nrl-pr2808-q30b and nrl-pr2808-dsv3", true, "nemo_rl_xfer"},
    };
    v.push_back(s);
  }
  {
    SystemProfile s;
    s.name = "nemo_rl_nccl_reshard_python_fallback";
    s.system = "NeMo RL, nccl_reshard through xferdtensor_python_impl, its pure-Python fallback (PR #2971, 2026)";
    s.strategy = "direct";
    s.schedule =
        "the FFN and expert weights as nccl_reshard's, but planned in Python per parameter and moved by nccl4py's "
        "batched send/recv between the GPUs that hold and need each slice (direct), the rest by the packed broadcast "
        "(a few hundred tensors, here moved directly as well); the Python plan and issue of a parameter's batch, and "
        "its wait, run before the next parameter's: host and transfers add up";
    s.cost = base(s.name);
    s.cost.per_tensor = Seconds{kFallbackPerTensor};
    s.constants = {
        {"per_tensor", micros(kFallbackPerTensor),
         "per parameter: the Python overlap planning and the batched send/recv issue and wait of nccl4py",
         "fitted on nrl-pr2971-py-q30b-b (params/nemo_rl-fallback-published.csv)", true, "nemo_rl_fallback", ""},
        {"host_overlaps", "false", "a parameter's batch is waited for before the next is planned",
         "nemo_rl xferdtensor_python_impl (PR #2971)", false},
    };
    v.push_back(s);
  }
  {
    SystemProfile s;
    s.name = "nemo_rl_nixl";
    s.system = "NeMo RL, refit_transport: nixl (the NIXL checkpoint engine, PR #2608, 2026)";
    s.strategy = "direct";
    s.schedule =
        "each vLLM rank pulls, one-sided over UCX, the buckets its paired policy worker has exported (Megatron-Bridge "
        "export on every policy rank, two registered buffers): with shard_expert_weights its TP slice of every expert "
        "and every other tensor whole (the scenario's destination says what arrives), loaded by direct copy "
        "(experts) and vLLM's load_weights (the rest). A rank reads its paired worker's buffer once per bucket, so "
        "the reads are few (18 a rank for DeepSeek-V3); direct spreads the pulls over the tensors' holders, where "
        "NeMo RL pairs each rollout rank with one policy worker that holds every exported tensor";
    s.cost = nemo_rl_cost();
    s.cost.per_tensor = Seconds{kPythonPerTensor};
    s.cost.tensor_streams = 1;
    s.cost.host_overlaps = false;
    s.constants = {
        {"per_tensor", micros(kPythonPerTensor),
         "per tensor: Megatron-Bridge's export and packing on the policy side, the loader on the rollout side",
         "nemo_rl_broadcast's per_broadcast_tensor, carried (the same export and loader; fitted on nrl-anchor-*)", false, "nemo_rl", "per_broadcast_tensor"},
        {"copy_passes", "14.1", "passes over the bytes each GPU sends and receives (NeMo RL's, with its export)",
         "nemo_rl_broadcast's, carried (fitted on nrl-anchor-*)", false, "nemo_rl", ""},
        {"host_overlaps", "false", "a rollout rank reads a bucket, waits for it, loads it, then reads the next: its reads "
         "and its loading add up (the policy's export of the next bucket runs meanwhile, in the per-tensor cost)",
         "nemo_rl/utils/checkpoint_engines/nixl.py, _receive_weight_chunk_batches", false},
    };
    v.push_back(s);
  }
  for (bool p2p : {false, true}) {
    SystemProfile s;
    s.name = p2p ? "checkpoint_engine_p2p" : "checkpoint_engine";
    s.system = std::string("MoonshotAI checkpoint-engine, ") + (p2p ? "P2P update over mooncake-transfer-engine" : "broadcast update") +
               " (checkpoint_engine/ps.py, 2025)";
    s.strategy = "gather_broadcast";
    s.schedule =
        p2p ? "as the broadcast update, but the rank that broadcasts a bucket first reads it with RDMA from the owner's "
              "host memory (mooncake batch_transfer_sync_read) instead of copying it in over PCIe: a bucket's read, "
              "broadcast and load run one after another, the read not overlapped"
            : "every rank holds a share of the checkpoint in pinned host memory; per round each owner copies a bucket "
              "to its GPU (H2D), then each bucket is broadcast from its owner to every rank of every instance (one NCCL "
              "group, a ring per rail) into a buffer the colocated vLLM worker opens over CUDA IPC and loads while the "
              "next bucket travels; an all_reduce and a synchronize per bucket";
    s.cost = base(s.name);
    s.cost.per_broadcast_tensor = Seconds{kCkptLoadPerTensor};
    s.cost.per_bucket = Seconds{p2p ? kCkptP2pPerBucket : kCkptPerBucket};
    s.cost.copy_passes = 1;
    s.cost.host_passes = 1;
    s.cost.host_overlaps = true;
    s.constants = {
        {"per_broadcast_tensor", micros(kCkptLoadPerTensor),
         "per tensor: the vLLM worker's load_weights (v0.10.2, with the FP8 patch for FP8 checkpoints), every worker "
         "loading every tensor of every bucket, all workers at once",
         "fitted with per_bucket on ckpt-qwen3-8-bcast and ckpt-deepseek-16-bcast (params/checkpoint-engine-published.csv)",
         !p2p, "checkpoint_engine"},
        {"per_bucket", micros(p2p ? kCkptP2pPerBucket : kCkptPerBucket),
         p2p ? "per bucket: the RDMA read of the bucket from the owner's host memory (issue, wait) and the broadcast's "
               "all_reduce, synchronize and ZMQ round trip"
             : "per bucket: the all_reduce of the workers' return codes, a device synchronize and the ZMQ round trip "
               "to the worker",
         p2p ? "fitted on ckpt-deepseek-16-p2p (params/checkpoint-engine-p2p-published.csv)"
             : "fitted with per_broadcast_tensor on ckpt-qwen3-8-bcast and ckpt-deepseek-16-bcast",
         true, p2p ? "checkpoint_engine_p2p" : "checkpoint_engine"},
        {"host_passes", "1", "each owner copies its buckets from pinned host memory to its GPU (H2D over PCIe) before "
         "they are broadcast, not overlapped", "checkpoint_engine/ps.py, ParameterServer._copy_to_buffer", false},
        {"copy_passes", "1", "the owner copies the H2D buffer into the broadcast buffer; the worker's loader copies out of it",
         "checkpoint_engine/ps.py, _update_per_bucket; worker.py, _extract_weights", false},
        {"host_overlaps", "true", "the worker loads bucket k - 1 while bucket k is broadcast (the socket.recv after "
         "dist.broadcast)", "checkpoint_engine/ps.py, _update_per_bucket", false},
    };
    if (p2p) s.constants[0] = {"per_broadcast_tensor", micros(kCkptLoadPerTensor),
                               "per tensor: the vLLM worker's load_weights, as the broadcast update's",
                               "checkpoint_engine's, carried over (fitted there)", false, "checkpoint_engine", ""};
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

const std::vector<ProfileFit>& profile_fits() {
  static const std::vector<ProfileFit> fits{
      // The base of the two shared fits is a profile with the shared cost terms (nemo_rl_cost(), miles_cost()).
      {"nemo_rl", "params/nemo_rl-published.csv", "nemo_rl_broadcast", {"per_tensor", "per_broadcast_tensor", "copy_passes"},
       {"nrl-anchor-q235-bcast", "nrl-anchor-q235-reshard", "nrl-anchor-dsv3-bcast", "nrl-anchor-dsv3-reshard"}},
      {"miles", "params/miles-published.csv", "slime", {"per_tensor", "per_broadcast_tensor"},
       {"miles-qwen3-30b-nccl", "miles-qwen3-30b-p2p"}},
      {"nemo_rl_fallback", "params/nemo_rl-fallback-published.csv", "nemo_rl_nccl_reshard_python_fallback", {"per_tensor"},
       {"nrl-pr2971-py-q30b-b"}},
      {"nemo_rl_xfer", "params/nemo_rl-xfer-published.csv", "nemo_rl_nccl_xfer_premerge", {"per_tensor", "per_call_rank"},
       {"nrl-pr2808-q30b", "nrl-pr2808-dsv3"}},
      {"verl", "params/verl-published.csv", "verl", {"per_broadcast_tensor"}, {"verl-ce-h100-nccl"}},
      {"checkpoint_engine", "params/checkpoint-engine-published.csv", "checkpoint_engine",
       {"per_broadcast_tensor", "per_bucket"}, {"ckpt-qwen3-8-bcast", "ckpt-deepseek-16-bcast"}},
      // After checkpoint_engine: its base carries that fit's per_broadcast_tensor.
      {"checkpoint_engine_p2p", "params/checkpoint-engine-p2p-published.csv", "checkpoint_engine_p2p", {"per_bucket"},
       {"ckpt-deepseek-16-p2p"}},
  };
  return fits;
}

const ProfileFit* find_profile_fit(const std::string& name) {
  for (const auto& f : profile_fits())
    if (f.name == name) return &f;
  return nullptr;
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
