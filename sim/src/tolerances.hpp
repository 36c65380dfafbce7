// Internal to the simulator: every rounding tolerance and precision constant in one place, each with
// the reason for its value. The simulation is exact in exact arithmetic (flow_sim.hpp); these only
// absorb the last bits that floating point leaves.
#pragma once

namespace reshard::sim::tolerance {

// The local refill's max-min conditions (a)-(c) (MaxMinSolver::solve, maxmin.hpp) are checked to
// this relative tolerance of a link's capacity or rate: exact arithmetic would see no violation
// where rounding leaves a few ulps, and a looser check would let errors add up over refills.
inline constexpr double kRefillCheck = 1e-10;

// The level cut (MaxMinSolver::fill_component) refills every class at or above theta, lowered by
// this relative margin: rates equal to theta in exact arithmetic may differ in the last bits (two
// links saturating at the same level), and such classes can change.
inline constexpr double kThetaMargin = 1e-9;

// Events within this relative distance of the batch's time are handled in the same batch, with
// one refill: flows the schedule treats alike finish a few hundred ulps apart (their rates come
// from different arithmetic paths), and one refill for them all halves the refills of a tuned
// schedule (qwen3-235b, docs/performance.md) while moving no time by more than this.
inline constexpr double kBatchWindow = 1e-12;

// A flow counts as finished when it is within kFinishRelative of its bytes plus kFinishBytes (or
// within what its rate sends in the batch window): its finish event was computed for the moment
// its level is reached, and the subtraction and division that computed it leave a few ulps.
inline constexpr double kFinishRelative = 1e-9;
inline constexpr double kFinishBytes = 1e-6;

// The link totals of the solver (allocated load) are fixed-point integers in units of
// 2^(e - kFixedPointBits), where 2^e is the power of two just above the link's capacity: a term
// added at one commit and removed at a later one is the same integer, so millions of updates
// leave no drift, and an int64 holds 8 times the capacity (2^63 / 2^60).
inline constexpr int kFixedPointBits = 60;

// The symmetry quotient takes flows whose bytes and latencies agree in their leading
// kAlikeSignificantBits bits (rounded) as alike, and runs its first one: the channel parts of one
// buffer differ by an element (a ring broadcast's 72 parts of a 1.6 GB bucket: 2 bytes in 22 MB),
// and the latencies of rotated rings are the same hop latencies summed in another order (a few
// ulps), which would otherwise make every channel a class of its own. A member's times are then
// its class's, off by at most 2^-24 (6e-8) of its own.
inline constexpr int kAlikeSignificantBits = 24;

// Link bytes summed per route instead of per sub-flow (op_quotient.cpp) only while every partial
// sum is an integer below 2^53, so exact in any order.
inline constexpr double kExactIntegerSums = 0x1p53;

}  // namespace reshard::sim::tolerance
