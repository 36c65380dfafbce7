// What `reshard plan` reports of a scenario's transfer set besides the pieces and the lower bound
// (study::plan_json): bytes per tensor class, the per-GPU spread of what is received and sent, each
// side's GPU memory at its tightest GPU. A value computed from the loaded scenario and its transfer
// set; the CLI prints it as text or, with the rest of the plan, as reshard-plan-1 JSON (plan_report_json).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reshard/model/membership.hpp"
#include "reshard/model/memory.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"

namespace reshard::study {

// The largest and the mean of a per-GPU quantity.
struct ByteSpread {
  double max = 0, mean = 0;
  double imbalance() const { return mean > 0 ? max / mean : 0; }
};

// Bytes per tensor class (index model::TensorClass): logical, needed (summed over destination
// ranks), pieces.
struct ClassBytes {
  std::vector<double> logical = std::vector<double>(model::kTensorClassCount, 0), needed = logical;
  std::vector<std::int64_t> pieces = std::vector<std::int64_t>(model::kTensorClassCount, 0);
};

// One side's GPU memory (LoadedScenario::memory) at its tightest GPU: the one whose weights +
// staging budget come nearest its limit, (weights + budget) / limit largest; where no GPU of the
// side has a known limit, the one with the most weights + budget. Ties: the lowest GPU.
struct SideMemory {
  model::GpuId gpu = -1;
  model::GpuMemoryUse use;              // the tightest GPU's
  model::Bytes weights_max;             // the most weights any GPU of the side holds
  model::Bytes budget_min, budget_max;  // the side's staging budgets (0: unbounded)
  bool other_side = false;              // a GPU on both sides took the other side's smaller budget
};

struct PlanSummary {
  ClassBytes by_class;
  ByteSpread destination_received, source_sent;  // per GPU (sent: split evenly over holders)
  SideMemory source_memory, destination_memory;
  std::size_t world_size = 0;  // GPUs of either side
};

PlanSummary summarize_plan(const model::LoadedScenario& sc, const model::TransferSet& ts);

// `plan --json`, schema reshard-plan-1 (docs/json-schema.md); with a schedule, its strategy, size
// and peak staging, and the file it was written to (schedule_file; empty: none).
nlohmann::json plan_report_json(const model::LoadedScenario& sc, const model::TransferSet& ts, const model::LowerBound& lb,
                                const PlanSummary& summary, const std::optional<model::Schedule>& schedule,
                                const std::string& schedule_file);

// A changed membership (model/membership.hpp) as the `membership` object of plan, compare and
// simulate JSON (docs/schema): the lost GPUs by side, the source bytes they held, the destination's
// serving units served and out.
nlohmann::json membership_json(const model::MembershipChange& c);

}  // namespace reshard::study
