// Measurements: JSON in and out, and the step-by-step comparison with the cost model.
#include <limits>
#include <nlohmann/json.hpp>

#include "reshard/model/checked.hpp"
#include "reshard/model/digest.hpp"
#include "reshard/model/json_file.hpp"
#include "reshard/exec/measurement.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario_digest.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/memory.hpp"

namespace reshard::exec {

using namespace reshard::model;

namespace {

struct StepSpan {
  double start = -1, end = -1;
  std::int64_t ops = 0, bytes = 0;
};

std::vector<StepSpan> spans(const Measurement& m, const std::vector<std::int32_t>& step, std::int32_t count) {
  std::vector<StepSpan> out(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < m.schedule.ops.size(); ++i) {
    auto& sp = out[static_cast<std::size_t>(step[i])];
    const MeasuredOpTiming& t = m.ops[i];
    sp.ops += 1;
    sp.bytes += m.schedule.ops[i].bytes.value;
    if (t.start_s >= 0) sp.start = sp.start < 0 ? t.start_s : std::min(sp.start, t.start_s);
    if (t.end_s >= 0) sp.end = std::max(sp.end, t.end_s);
  }
  return out;
}

// The measurement's scenario (with its --set overrides) and its plan, which must be the one the
// schedule was built on (the same piece count).
std::pair<LoadedScenario, TransferSet> measured_plan(const Measurement& m) {
  LoadedScenario sc = load_scenario(std::filesystem::path(m.scenario_path), measurement_overrides(m));
  TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  if (m.schedule.piece_count != static_cast<std::int32_t>(ts.pieces.size()))
    throw ScheduleError("the measured schedule has " + std::to_string(m.schedule.piece_count) + " pieces, scenario '" +
                        m.scenario_path + "' plans " + std::to_string(ts.pieces.size()));
  return {std::move(sc), std::move(ts)};
}

}  // namespace

nlohmann::json to_json(const Measurement& m, const RunPlan& plan) {
  const Topology& topo = plan.scenario->topology;
  nlohmann::json j;
  j["format"] = "reshard-measurement-1";
  j["scenario"] = m.scenario_path;
  if (!m.scenario_sets.empty()) j["set"] = m.scenario_sets;
  j["backend"] = m.backend;
  j["profile"] = m.profile;
  if (!m.params_file.empty()) j["params_file"] = m.params_file;
  j["ranks"] = m.ranks;
  j["gpus"] = plan.gpus.size();
  j["params"] = to_json(m.schedule)["params"];
  j["verified"] = m.verified;
  j["verification"] = to_string(m.verification);
  j["bytes_verified"] = m.bytes_verified;
  j["elapsed_s"] = m.elapsed_s;
  if (m.device_copy_bytes > 0) j["device_copy_bytes"] = m.device_copy_bytes;
  if (m.host_calls) {
    const HostCalls& c = *m.host_calls;
    j["host_calls"] = {{"launches", c.launches}, {"copies", c.copies}, {"nccl", c.nccl}, {"syncs", c.syncs},
                       {"events", c.events},     {"total", c.total()},  {"per_step", c.per_step}};
  }
  auto& ops = j["ops"] = nlohmann::json::array();
  for (std::size_t i = 0; i < m.schedule.ops.size(); ++i) {
    const Op& o = m.schedule.ops[i];
    const MeasuredOpTiming& t = m.ops[i];
    // A chain op's route is the worst link kind over its hops.
    LinkKind kind = LinkKind::NVLink;
    if (o.chain >= 0) {
      for (const ChainHop& h : m.schedule.chains[static_cast<std::size_t>(o.chain)].hops)
        kind = std::max(kind, topo.route(h.from, h.to).kind);
    } else {
      kind = topo.route(o.src, o.dst).kind;
    }
    nlohmann::json op = {{"id", o.id}, {"src", o.src}, {"dst", o.dst}, {"bytes", o.bytes.value},
                         {"route", to_string(kind)}, {"phase", to_string(o.phase)},
                         {"step", plan.step_of[i]}, {"start_s", t.start_s}, {"end_s", t.end_s},
                         {"seconds", t.end_s >= 0 && t.start_s >= 0 ? t.end_s - t.start_s : -1.0}};
    if (o.chain >= 0) {
      const Chain& c = m.schedule.chains[static_cast<std::size_t>(o.chain)];
      op["chain"] = o.chain;
      op["hops"] = c.hops.size();
      op["chunk_bytes"] = c.chunk.value;
    }
    ops.push_back(std::move(op));
  }
  auto& steps = j["steps"] = nlohmann::json::array();
  const auto sp = spans(m, plan.step_of, plan.steps);
  for (std::size_t k = 0; k < sp.size(); ++k)
    steps.push_back({{"step", k}, {"ops", sp[k].ops}, {"bytes", sp[k].bytes}, {"start_s", sp[k].start},
                     {"end_s", sp[k].end}, {"seconds", sp[k].end >= sp[k].start ? sp[k].end - sp[k].start : 0.0}});
  if (!m.staging.empty()) {
    auto& staging = j["staging"] = nlohmann::json::array();
    for (const GpuStaging& g : m.staging) staging.push_back({{"gpu", g.gpu}, {"peak_staging_bytes", g.bytes}});
  }
  j["schedule"] = to_json(m.schedule);
  const std::string scenario = model::scenario_digest(plan.scenario->scenario);
  j["digest"] = {{"document", model::document_digest(j)}, {"scenario", scenario}};
  return j;
}

std::vector<StepComparison> compare_with_prediction(const Measurement& m) {
  const auto [sc, ts] = measured_plan(m);
  check_schedule_gpus(m.schedule, sc.topology.gpu_count());
  validate(m.schedule, ts, sc.inventory, sc.source, sc.destination);
  const CostParams cost = CostParams::named_or_loaded(m.profile, m.params_file);
  std::int32_t count = 0;
  const auto step = op_steps(m.schedule, count);
  const auto sp = spans(m, step, count);
  std::vector<StepComparison> out;
  // Each step alone: its operations without dependencies (they all wait only for earlier steps),
  // with every chain (indices kept): ops of one chain in the step still run in order.
  for (std::int32_t k = 0; k < count; ++k) {
    Schedule sub;
    sub.scenario = m.schedule.scenario;
    sub.params = m.schedule.params;
    sub.piece_count = m.schedule.piece_count;
    sub.slots = m.schedule.slots;
    sub.budget = m.schedule.budget;
    sub.buffers = m.schedule.buffers;
    sub.chains = m.schedule.chains;
    for (std::size_t i = 0; i < m.schedule.ops.size(); ++i) {
      if (step[i] != k) continue;
      sub.add_op(m.schedule.ops[i], {});
    }
    const auto& s = sp[static_cast<std::size_t>(k)];
    out.push_back({k, s.ops, s.bytes, estimate(sub, ts, sc.inventory, sc.topology, cost).time.value,
                   s.end >= s.start ? s.end - s.start : 0.0});
  }
  std::int64_t bytes = 0;
  for (const auto& o : m.schedule.ops) bytes += o.bytes.value;
  out.push_back({-1, static_cast<std::int64_t>(m.schedule.ops.size()), bytes,
                 estimate(m.schedule, ts, sc.inventory, sc.topology, cost).time.value, m.elapsed_s});
  return out;
}

namespace {

// A backend model's prediction (its steps, each with `step` and `time`, and its total) against the
// measured span of each step and the whole run.
template <class Prediction>
std::vector<StepComparison> compare_steps(const Measurement& m, const RunPlan& rp, const Prediction& pred) {
  const auto sp = spans(m, rp.step_of, rp.steps);
  std::vector<StepComparison> out;
  for (const auto& st : pred.steps) {
    const auto& s = sp[static_cast<std::size_t>(st.step)];
    out.push_back({st.step, s.ops, s.bytes, st.time.value, s.end >= s.start ? s.end - s.start : 0.0});
  }
  std::int64_t bytes = 0;
  for (const auto& o : m.schedule.ops) bytes += o.bytes.value;
  out.push_back({-1, static_cast<std::int64_t>(m.schedule.ops.size()), bytes, pred.time.value, m.elapsed_s});
  return out;
}

}  // namespace

std::vector<StepComparison> compare_with_host_model(const Measurement& m, const HostProfile& profile,
                                                    const std::string& file, HostPrediction* terms) {
  if (m.backend != "host")
    throw ConfigError(file, 0, "backend",
                      "'" + m.backend + "': the host profile predicts runs of the host backend (reshard exec --backend host); "
                      "check this measurement without it");
  const auto [sc, ts] = measured_plan(m);
  const RunPlan rp = make_run_plan(sc, ts, m.schedule);  // the run's GPUs, as the backend dealt them to processes
  const HostPrediction pred = estimate_host(m.schedule, rp.gpus, m.ranks, profile);
  if (terms) *terms = pred;
  return compare_steps(m, rp, pred);
}

std::vector<StepComparison> compare_with_device_model(const Measurement& m, const DeviceProfile& profile,
                                                      const std::string& file, DevicePrediction* terms) {
  if (m.backend != "cuda")
    throw ConfigError(file, 0, "backend",
                      "'" + m.backend + "': the device profile predicts runs of the cuda backend (reshard exec --backend cuda, "
                      "every GPU a virtual rank on one device); check this measurement without it");
  const auto [sc, ts] = measured_plan(m);
  const RunPlan rp = make_run_plan(sc, ts, m.schedule);
  const DevicePrediction pred = estimate_device(m.schedule, profile);
  if (terms) *terms = pred;
  return compare_steps(m, rp, pred);
}

std::vector<StagingComparison> compare_staging(const Measurement& m) {
  const StagingMemory predicted = staging_memory(m.schedule);
  std::vector<StagingComparison> out;
  for (const GpuStaging& g : m.staging) {
    const auto i = static_cast<std::size_t>(g.gpu);
    out.push_back({g.gpu, i < predicted.per_gpu.size() ? predicted.per_gpu[i].value : 0, g.bytes});
  }
  return out;
}

}  // namespace reshard::exec
