// What losing GPUs during a refit costs, by the two ways to recover (docs/robustness.md, "Pricing a
// failure"). A refit whose schedule takes R (simulated) loses GPUs at time t, when a fraction f of
// its work is done; the survivors notice after the detection timeout D, then either
//   abort + rebuild (what frameworks do today):  t + D + init(n')  + R'
//     every rank aborts the communicator, a new one is initialised over the n' survivors, and the
//     whole refit runs again over them;
//   revoke + shrink + resume:                     t + D + shrink(n) + (1 - f) R'
//     the communicator of n ranks is revoked and shrunk to the survivors, and only the work not
//     done by t runs, over them.
// R' is the survivors' refit: the same strategy over the plan restricted to the survivors
// (model/membership.hpp), simulated. (1 - f) R' takes the work left as a share of the survivors'
// whole refit: the resumed transfers are the unfinished part of the same schedule.
//
// The terms and where their constants come from:
//   shrink(n) = a + b log2 n: the least-squares line through ncclCommShrink's six published times in
//     a refit group, 1.53 s at 32 ranks, 1.38 (64), 1.44 (128), 1.67 (256), 2.03 (512), 2.02 s
//     (1 024) (NVIDIA-NeMo/RL PR #3186, a demo on Qwen3-30B-A3B): a = 0.686 s, b = 0.132 s per
//     doubling. Fitted to all six points (none left to check it on); above 1 024 ranks it is an
//     extrapolation.
//   init(n) = c + s n: NCCL's bootstrap allgathers are rings of n - 1 sequential steps
//     (src/bootstrap.cc, bootstrapAllGather; NVIDIA/nccl PR #1791 halves the steps), so the init
//     grows linearly with the ranks. c = 2.56 s: an 8-rank init's bootstrap, allocation, topology,
//     graph and connection phases as NCCL logs them (NVIDIA/nccl #1646, the kernel loading left
//     out); s = (150 s - c) / 4 096 = 36 ms per rank, from the "2.5-minute init time at large scale
//     (above certain K GPUs)" of NVIDIA/nccl #1156, read as 4 096 ranks: one calibration point,
//     its rank count our reading. A faster NCCL (ring building 26 s at 96 k ranks, NVIDIA/nccl PR
//     #1789) is a smaller s: RecoveryTerms is a value, each term can be replaced.
//   D: 15 s by default, NeMo RL's tuned fleet probes (5 s interval x 3 misses); older defaults
//     60-90 s; PyTorch's default NCCL timeout 30 min.
#pragma once

#include <cstdint>

#include "reshard/model/units.hpp"

namespace reshard::model {

struct RecoveryTerms {
  Seconds detect{15};                  // the detection timeout D
  Seconds init_fixed{2.56};            // c
  Seconds init_per_rank{0.036};        // s
  Seconds shrink_fixed{0.686};         // a
  Seconds shrink_per_doubling{0.132};  // b
  Seconds init(std::int64_t ranks) const;    // c + s n
  Seconds shrink(std::int64_t ranks) const;  // a + b log2 n
};

// What the failure hits: when, how much of the refit is done by then, the refits' times and the
// communicator's ranks before and after.
struct FailureInputs {
  Seconds fail_at;                 // t, from the refit's start
  double done = 0;                 // f, the share of the refit's work done by t (0..1)
  Seconds refit;                   // R, the whole refit as planned
  Seconds survivors_refit;         // R', the whole refit over the survivors
  Bytes survivors_bytes;           // the bytes R' moves
  std::int64_t ranks = 0;          // n, the communicator's ranks before the failure
  std::int64_t survivor_ranks = 0; // n'
};

// One way to recover, term by term, from the refit's start.
struct RecoveryPath {
  Seconds until_failure, detect, communicator, transfer;
  Bytes bytes;  // what moves after the recovery
  Seconds total() const { return until_failure + detect + communicator + transfer; }
};

struct FailureCost {
  RecoveryPath rebuild;  // abort + rebuild
  RecoveryPath resume;   // revoke + shrink + resume
  Seconds saving() const { return rebuild.total() - resume.total(); }  // what resuming saves
};

FailureCost price_failure(const FailureInputs& in, const RecoveryTerms& terms = {});

}  // namespace reshard::model
