// Prediction <-> JSON (cost.hpp): one table of the fields, with the names every output uses
// (compare's rows and systems, the Python module's estimate), serves both directions.
#include <cmath>
#include <stdexcept>
#include <limits>
#include <utility>

#include "reshard/model/checked.hpp"
#include "reshard/model/cost.hpp"

namespace reshard::model {

namespace {

constexpr std::pair<const char*, Seconds Prediction::*> kTimes[] = {
    {"estimate_s", &Prediction::time},
    {"bandwidth_bound_s", &Prediction::bandwidth_bound},
    {"pipeline_s", &Prediction::pipeline},
    {"latency_path_s", &Prediction::latency_path},
    {"critical_path_s", &Prediction::critical_path},
    {"overheads_s", &Prediction::overheads},
    {"host_s", &Prediction::host},
    {"device_s", &Prediction::device},
    {"barrier_s", &Prediction::barrier},
    {"copies_s", &Prediction::copies},
    {"convert_source_s", &Prediction::convert_source},
    {"convert_destination_s", &Prediction::convert_destination},
    {"fill_s", &Prediction::fill},
    {"steps_bound_s", &Prediction::steps_bound},
    {"load_s", &Prediction::load},
    {"reads_s", &Prediction::reads},
    {"host_copies_s", &Prediction::host_copies},
    {"fixed_s", &Prediction::fixed},
    {"issue_s", &Prediction::issue}};
// Written only when not 0 (a delta refit's), read when present: outputs without a delta keep their keys.
constexpr std::pair<const char*, Seconds Prediction::*> kOptionalTimes[] = {
    {"delta_source_s", &Prediction::delta_source}, {"delta_destination_s", &Prediction::delta_destination}};
constexpr std::pair<const char*, Bytes Prediction::*> kBytes[] = {{"network_bytes", &Prediction::network_bytes},
                                                                  {"nvlink_bytes", &Prediction::nvlink_bytes},
                                                                  {"peak_staging_bytes", &Prediction::staging_peak}};
constexpr std::pair<const char*, std::int64_t Prediction::*> kCounts[] = {
    {"operations", &Prediction::operations},
    {"reshard_tensors", &Prediction::reshard_tensors},
    {"call_ranks", &Prediction::call_ranks},
    {"broadcast_tensors", &Prediction::broadcast_tensors},
    {"broadcast_buckets", &Prediction::broadcast_buckets},
    {"broadcast_stages", &Prediction::broadcast_stages},
    {"loaded_tensors", &Prediction::loaded_tensors},
    {"loaded_experts", &Prediction::loaded_experts},
    {"read_count", &Prediction::read_count},
    {"engine_calls", &Prediction::engine_calls}};
constexpr std::pair<const char*, std::int32_t Prediction::*> kSmallCounts[] = {
    {"bottleneck", &Prediction::bottleneck},
    {"chain_depth", &Prediction::chain_depth},
    {"peak_staging_gpu", &Prediction::staging_gpu},
    {"steps", &Prediction::steps},
    {"over_budget_gpus", &Prediction::over_budget}};
// The tables above hold every field (19 + 2 times, 3 byte counts, 10 + 5 counts and the padding of the
// 32-bit ones on LP64): a field added to Prediction fails here until it is added to them.
static_assert(sizeof(Prediction) == 21 * 8 + 3 * 8 + 10 * 8 + 5 * 4 + 3 * 4,
              "Prediction has a field the JSON tables above do not: add it");

double time_value(const nlohmann::json& v, const checked::JsonWhere& w) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    w.fail("expected a number, \"inf\", \"-inf\" or \"nan\"");
  }
  return checked::finite(v, w);
}

}  // namespace

nlohmann::json time_json(Seconds t) {
  if (std::isfinite(t.value)) return t.value;
  return std::isnan(t.value) ? "nan" : t.value > 0 ? "inf" : "-inf";
}

Seconds time_from_json(const nlohmann::json& j) {
  const std::string file;
  return Seconds{time_value(j, {file, "time"})};
}

nlohmann::json to_json(const Prediction& p) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, field] : kTimes) j[key] = time_json(p.*field);
  for (const auto& [key, field] : kOptionalTimes)
    if ((p.*field).value != 0) j[key] = time_json(p.*field);
  for (const auto& [key, field] : kBytes) j[key] = (p.*field).value;
  for (const auto& [key, field] : kCounts) j[key] = p.*field;
  for (const auto& [key, field] : kSmallCounts) j[key] = p.*field;
  return j;
}

nlohmann::json prediction_fields(const Prediction& p, std::initializer_list<std::string_view> names) {
  nlohmann::json j = nlohmann::json::object();
  for (std::string_view name : names) {
    const std::string key(name);
    bool found = false;
    for (const auto& [k, field] : kTimes)
      if (name == k) j[key] = (p.*field).value, found = true;
    for (const auto& [k, field] : kOptionalTimes)
      if (name == k) j[key] = (p.*field).value, found = true;
    for (const auto& [k, field] : kBytes)
      if (name == k) j[key] = (p.*field).value, found = true;
    for (const auto& [k, field] : kCounts)
      if (name == k) j[key] = p.*field, found = true;
    for (const auto& [k, field] : kSmallCounts)
      if (name == k) j[key] = p.*field, found = true;
    if (!found) throw std::logic_error("prediction_fields: no field '" + key + "'");
  }
  return j;
}

Prediction prediction_from_json(const nlohmann::json& j) {
  using namespace checked;
  const std::string file;
  const JsonWhere w{file, "prediction"};
  Prediction p;
  for (const auto& [key, field] : kTimes) (p.*field).value = time_value(member(j, key, w), w.at(key));
  for (const auto& [key, field] : kOptionalTimes)
    if (j.contains(key)) (p.*field).value = time_value(j.at(key), w.at(key));
  for (const auto& [key, field] : kBytes) (p.*field).value = integer_as<std::int64_t>(member(j, key, w), w.at(key));
  for (const auto& [key, field] : kCounts) p.*field = integer_as<std::int64_t>(member(j, key, w), w.at(key));
  for (const auto& [key, field] : kSmallCounts) p.*field = integer_as<std::int32_t>(member(j, key, w), w.at(key));
  return p;
}

}  // namespace reshard::model
