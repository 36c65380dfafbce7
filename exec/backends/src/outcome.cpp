#include "outcome.hpp"

namespace reshard::exec::detail {

RunResult reporter_result(const RunPlan& plan, const ExecOptions& options, int world, const LocalOutcome& merged,
                          const std::vector<std::string>& errors, std::vector<PieceDigest> digests) {
  RunResult res;
  res.rank = 0;
  res.world = world;
  res.reporter = true;
  res.measurement = new_measurement(plan, options, world);
  std::string first;
  int failing = 0;
  std::int64_t bytes = merged.bytes_verified;
  if (options.verification == Verification::Digest) {
    std::int64_t compared = 0;
    first = compare_digests(std::move(digests), *plan.transfers, plan.scenario->inventory, compared);
    if (!first.empty()) failing = 1;
    bytes = compared;
  }
  for (const std::string& m : errors) {
    if (m.empty()) continue;
    if (failing++ == 0) first = m;
  }
  if (failing)
    throw ExecError("verification failed: " + first +
                        (failing > 1 ? " (and " + std::to_string(failing - 1) + " more ranks found wrong bytes)" : ""),
                    0, -1);
  auto& m = res.measurement;
  for (std::size_t i = 0; i < merged.start.size(); ++i) m.ops[i] = {merged.start[i], merged.end[i]};
  m.bytes_verified = bytes;
  m.elapsed_s = merged.elapsed;
  for (std::size_t i = 0; i < merged.staging.size() && i < plan.gpus.size(); ++i)
    if (merged.staging[i] >= 0) m.staging.push_back({plan.gpus[i], merged.staging[i]});
  m.host_calls = merged.host_calls;
  m.verified = options.verification != Verification::None;
  m.verification = options.verification;
  return res;
}

}  // namespace reshard::exec::detail
