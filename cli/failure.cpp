#include "failure.hpp"

#include <algorithm>
#include <ostream>

#include "reshard/model/checked.hpp"
#include "reshard/model/errors.hpp"
#include "inputs.hpp"
#include "reshard/study/plan_summary.hpp"
#include "table.hpp"

namespace reshard::cli {

using namespace reshard::model;

void add_failure_options(CLI::App* cmd, FailureOptions& o) {
  cmd->add_option("--fail", o.fail,
                  "Price losing these GPUs (one, or a node's: 0-3) at this time of the refit, e.g. 4608@0.5s: abort + "
                  "rebuild against revoke + shrink + resume (docs/robustness.md)");
  cmd->add_option("--detect", o.detect,
                  "With --fail: the time to notice the failure (default 15s, tuned probes; PyTorch's NCCL timeout is 1800s)");
  cmd->add_option("--init", o.init,
                  "With --fail: the new communicator's init time for abort + rebuild, as measured on your cluster "
                  "(default: 2.56s + 36ms per rank, docs/robustness.md)");
}

namespace {

// The refit communicator's ranks: every GPU of either side, once.
std::int64_t refit_ranks(const LoadedScenario& sc) {
  std::vector<GpuId> all = sc.source.gpus();
  all.insert(all.end(), sc.destination.gpus().begin(), sc.destination.gpus().end());
  std::sort(all.begin(), all.end());
  return std::unique(all.begin(), all.end()) - all.begin();
}

Seconds parse_time(const std::string& option, const std::string& value, const std::string& text) {
  try {
    return parse_duration(text);  // refuses a negative time
  } catch (const std::exception& e) {
    throw ConfigError(option, 0, value, checked::quote(text) + " is not a time with its unit (0.5s, 200ms): " + e.what());
  }
}

}  // namespace

std::optional<FailureReport> price_failure_option(const FailureOptions& o, const PlannedScenario& planned,
                                                  const Schedule& schedule, const sim::ScheduleSimulation& sim,
                                                  const CostParams& cost) {
  if (o.fail.empty()) {
    if (!o.detect.empty()) throw ConfigError("--detect", 0, o.detect, "needs --fail");
    if (!o.init.empty()) throw ConfigError("--init", 0, o.init, "needs --fail");
    return std::nullopt;
  }
  FailureReport r;
  r.value = o.fail;
  const auto at = o.fail.rfind('@');
  if (at == std::string::npos) throw ConfigError("--fail", 0, o.fail, "expected GPUS@TIME, e.g. 4608@0.5s or 0-3@1s");
  const std::vector<GpuId> lost = parse_lost_gpus(o.fail.substr(0, at), "--fail");
  r.inputs.fail_at = parse_time("--fail", o.fail, o.fail.substr(at + 1));
  if (!o.detect.empty()) r.terms.detect = parse_time("--detect", o.detect, o.detect);
  if (!o.init.empty()) {
    r.terms.init_fixed = parse_time("--init", o.init, o.init);
    r.terms.init_per_rank = Seconds{0};
  }
  r.inputs.refit = sim.makespan;
  if (r.inputs.fail_at >= sim.makespan)
    throw ConfigError("--fail", 0, o.fail, "the refit ends at " + format(sim.makespan) + ", before the failure; give a time below it");

  const PlannedScenario survivors = planned.without(lost, &r.change, "--fail", o.fail);
  const Schedule again = survivors.schedule_for(schedule.params, survivors.budgets());
  const LoadedScenario& ss = survivors.scenario();
  const Prediction p = estimate(again, survivors.transfers(), ss.inventory, ss.topology, cost);
  r.inputs.survivors_refit = sim::simulate_schedule(again, ss.topology, cost, sim::closing_terms(p)).makespan;
  r.inputs.survivors_bytes = survivors.transfers().bytes_to_move;
  r.inputs.done = sim::work_done_by(schedule, sim, r.inputs.fail_at);
  r.inputs.ranks = refit_ranks(planned.scenario());
  r.inputs.survivor_ranks = r.inputs.ranks - static_cast<std::int64_t>(r.change.lost.size());
  r.cost = price_failure(r.inputs, r.terms);
  return r;
}

void print_failure(std::ostream& out, const FailureReport& r) {
  const FailureInputs& in = r.inputs;
  out << "\nfailure: GPUs " << gpu_ranges(r.change.lost) << " lost at " << format(in.fail_at) << ", "
      << fixed(100 * in.done, 1) << " % of the refit's work done; noticed after " << format(r.terms.detect)
      << " (detection timeout)\n";
  print_fields(out, membership_fields(r.change));
  out << '\n';
  Table t({"recovery", "until failure>", "detect>", "communicator>", "transfer>", "total>", "moves>"});
  t.add({"abort + rebuild", format(r.cost.rebuild.until_failure), format(r.cost.rebuild.detect),
         "init " + format(r.cost.rebuild.communicator), format(r.cost.rebuild.transfer), format(r.cost.rebuild.total()),
         format(r.cost.rebuild.bytes)});
  t.add({"revoke + shrink + resume", format(r.cost.resume.until_failure), format(r.cost.resume.detect),
         "shrink " + format(r.cost.resume.communicator), format(r.cost.resume.transfer), format(r.cost.resume.total()),
         format(r.cost.resume.bytes)});
  t.print(out);
  out << "\nresume saves " << format(r.cost.saving()) << " (" << fixed(r.cost.rebuild.total() / r.cost.resume.total(), 1)
      << "x). The refit as planned: " << format(in.refit) << "; over the survivors: " << format(in.survivors_refit) << ".\n"
      << "init: NCCL init over " << in.survivor_ranks << " ranks, "
      << (r.terms.init_per_rank.value > 0 ? format(r.terms.init_fixed) + " + " + format(r.terms.init_per_rank) +
                                                " per rank (one calibration point: 2.5 min at large scale, NVIDIA/nccl #1156); "
                                          : format(r.terms.init_fixed) + " (--init); ")
      << "shrink: ncclCommShrink of " << in.ranks << " ranks, " << format(r.terms.shrink_fixed) << " + "
      << format(r.terms.shrink_per_doubling) << " x log2(ranks) (fitted to 32-1024 ranks, NVIDIA-NeMo/RL PR #3186"
      << (in.ranks > 1024 || in.ranks < 32 ? "; extrapolated here" : "") << "); the resumed transfer is the share of the survivors' refit not yet done.\n";
}

nlohmann::json failure_json(const FailureReport& r) {
  auto path = [](const RecoveryPath& p) {
    return nlohmann::json{{"until_failure_s", p.until_failure.value}, {"detect_s", p.detect.value},
                          {"communicator_s", p.communicator.value}, {"transfer_s", p.transfer.value},
                          {"total_s", p.total().value},     {"bytes", p.bytes.value}};
  };
  const FailureInputs& in = r.inputs;
  return {{"fail", r.value},
          {"membership", study::membership_json(r.change)},
          {"fail_at_s", in.fail_at.value},
          {"done", in.done},
          {"refit_s", in.refit.value},
          {"survivors_refit_s", in.survivors_refit.value},
          {"ranks", in.ranks},
          {"survivor_ranks", in.survivor_ranks},
          {"terms", {{"detect_s", r.terms.detect.value},
                     {"init_fixed_s", r.terms.init_fixed.value},
                     {"init_per_rank_s", r.terms.init_per_rank.value},
                     {"shrink_fixed_s", r.terms.shrink_fixed.value},
                     {"shrink_per_doubling_s", r.terms.shrink_per_doubling.value}}},
          {"abort_rebuild", path(r.cost.rebuild)},
          {"revoke_shrink_resume", path(r.cost.resume)},
          {"resume_saves_s", r.cost.saving().value}};
}

}  // namespace reshard::cli
