#include "reshard/model/measurement.hpp"

#include <limits>
#include <nlohmann/json.hpp>

#include "reshard/model/checked.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/json_file.hpp"
#include "reshard/model/scenario_digest.hpp"

namespace reshard::model {

const char* to_string(Verification v) {
  switch (v) {
    case Verification::Pattern: return "pattern";
    case Verification::Digest: return "digest";
    case Verification::None: return "none";
  }
  return "?";
}

Verification verification_named(const std::string& name, const std::string& key) {
  for (Verification v : {Verification::Pattern, Verification::Digest, Verification::None})
    if (name == to_string(v)) return v;
  throw ConfigError(key, 0, name, "expected pattern, digest or none");
}

Measurement load_measurement(const std::filesystem::path& path, bool accept_unverified, const std::filesystem::path& scenario_file) {
  using namespace checked;
  const std::string file = path.string();
  const nlohmann::json j = read_json_file(path, "measurement file");
  const JsonWhere root{file, ""};
  if (member(j, "format", root) != "reshard-measurement-1") root.at("format").fail("not a reshard measurement");
  Measurement m;
  m.scenario_path = string(member(j, "scenario", root), root.at("scenario"));
  if (j.contains("set")) {
    const auto sw = root.at("set");
    const auto& sets = array(j.at("set"), sw);
    for (std::size_t i = 0; i < sets.size(); ++i) m.scenario_sets.push_back(string(sets[i], sw.at(i)));
  }
  m.backend = string(member(j, "backend", root), root.at("backend"));
  m.profile = string(member(j, "profile", root), root.at("profile"));
  if (j.contains("params_file")) m.params_file = string(j.at("params_file"), root.at("params_file"));
  m.ranks = integer_as<std::int32_t>(member(j, "ranks", root), root.at("ranks"), 1);
  m.verified = boolean(member(j, "verified", root), root.at("verified"));
  if (j.contains("verification")) {
    try {
      m.verification = verification_named(string(j.at("verification"), root.at("verification")));
    } catch (const ConfigError&) {
      root.at("verification").fail("expected pattern, digest or none");
    }
  }
  m.bytes_verified = integer(member(j, "bytes_verified", root), root.at("bytes_verified"), 0,
                             std::numeric_limits<std::int64_t>::max());
  m.elapsed_s = finite(member(j, "elapsed_s", root), root.at("elapsed_s"));
  if (m.elapsed_s < 0) root.at("elapsed_s").fail("a negative elapsed time");
  if (j.contains("device_copy_bytes"))
    m.device_copy_bytes = integer(j.at("device_copy_bytes"), root.at("device_copy_bytes"), 0, std::numeric_limits<std::int64_t>::max());
  if (j.contains("host_calls")) {
    const auto w = root.at("host_calls");
    const auto& h = j.at("host_calls");
    HostCalls c;
    const auto count = [&](const char* key) { return integer(member(h, key, w), w.at(key), 0, std::numeric_limits<std::int64_t>::max()); };
    c.launches = count("launches");
    c.copies = count("copies");
    c.nccl = count("nccl");
    c.syncs = count("syncs");
    c.events = count("events");
    if (count("total") != c.total()) w.at("total").fail("is not the sum of launches, copies, nccl, syncs and events");
    const auto& steps = array(member(h, "per_step", w), w.at("per_step"));
    for (std::size_t k = 0; k < steps.size(); ++k)
      c.per_step.push_back(integer(steps[k], w.at("per_step").at(k), 0, std::numeric_limits<std::int64_t>::max()));
    m.host_calls = std::move(c);
  }
  m.schedule = schedule_from_json(member(j, "schedule", root), file, "schedule");
  // Exactly one timing per operation of the schedule, each time finite (-1: not recorded; start and
  // end come from different ranks' clocks, so end may precede start by the clocks' offset).
  const auto ow = root.at("ops");
  const auto& ops = array(member(j, "ops", root), ow);
  const auto n = static_cast<std::int64_t>(m.schedule.ops.size());
  if (static_cast<std::int64_t>(ops.size()) != n)
    ow.fail("lists " + std::to_string(ops.size()) + " operations, the schedule has " + std::to_string(n));
  std::vector<bool> seen(static_cast<std::size_t>(n), false);
  m.ops.assign(static_cast<std::size_t>(n), MeasuredOpTiming{});
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto w = ow.at(i);
    const auto id = static_cast<std::size_t>(integer(member(ops[i], "id", w), w.at("id"), 0, n - 1));
    if (seen[id]) w.at("id").fail("operation " + std::to_string(id) + " is listed twice");
    seen[id] = true;
    const double start = finite(member(ops[i], "start_s", w), w.at("start_s"));
    const double end = finite(member(ops[i], "end_s", w), w.at("end_s"));
    m.ops[id] = {start, end};
  }
  if (j.contains("staging")) {  // the peak staging bytes per GPU (host backend)
    const auto sw = root.at("staging");
    const auto& staging = array(j.at("staging"), sw);
    for (std::size_t i = 0; i < staging.size(); ++i) {
      const auto w = sw.at(i);
      m.staging.push_back({integer_as<GpuId>(member(staging[i], "gpu", w), w.at("gpu"), 0),
                           integer(member(staging[i], "peak_staging_bytes", w), w.at("peak_staging_bytes"), 0,
                                   std::numeric_limits<std::int64_t>::max())});
    }
  }
  std::filesystem::path scenario = scenario_file.empty() ? std::filesystem::path(m.scenario_path) : scenario_file;
  if (scenario_file.empty() && scenario.is_relative()) scenario = (path.parent_path() / scenario).lexically_normal();
  m.scenario_path = scenario.string();
  if (!accept_unverified) {
    // The scenario as exec ran it, with its --set overrides.
    const std::string why = measurement_distrust(j, Scenario::load(scenario, measurement_overrides(m)));
    if (!why.empty())
      throw ConfigError(file, 0, "", "refused: " + why + "; pass --accept-unverified to use it anyway");
  }
  return m;
}

std::vector<Override> measurement_overrides(const Measurement& m) {
  return parse_overrides(m.scenario_sets);
}

}  // namespace reshard::model
