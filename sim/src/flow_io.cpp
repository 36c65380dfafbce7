#include "reshard/sim/flow_io.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <string>

#include "reshard/model/checked.hpp"
#include "reshard/model/json_file.hpp"
#include "reshard/model/errors.hpp"

namespace reshard::sim {

nlohmann::json bytes_json(ByteAmount b) {
  const double whole = std::round(b.value);
  if (whole == b.value && std::fabs(whole) < 9e15) return static_cast<std::int64_t>(whole);
  return b.value;
}

nlohmann::json flows_to_json(const FlowNetwork& network, const std::vector<FlowSpec>& flows,
                             const FlowSimResult& result) {
  nlohmann::json links = nlohmann::json::array();
  for (std::size_t l = 0; l < network.capacity.size(); ++l)
    links.push_back({{"id", l}, {"capacity_Bps", network.capacity[l].value}});
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const FlowSpec& f = flows[i];
    const FlowTiming t = i < result.timing.size() ? result.timing[i] : FlowTiming{};
    out.push_back({{"id", f.id},
                   {"bytes", bytes_json(f.bytes)},
                   {"links", f.links},
                   {"latency_s", f.latency.value},
                   {"after", f.after},
                   {"release_s", t.release.value},
                   {"start_s", t.start.value},
                   {"finish_s", t.finish.value}});
  }
  return {{"links", std::move(links)}, {"flows", std::move(out)}};
}

void write_flow_dump(const std::filesystem::path& path, const FlowNetwork& network,
                     const std::vector<FlowSpec>& flows, const FlowSimResult& result) {
  std::ofstream out(path);
  if (!out) throw model::ConfigError(path.string(), 0, "", "cannot open the file for writing");
  out << flows_to_json(network, flows, result).dump() << '\n';
  if (!out) throw model::ConfigError(path.string(), 0, "", "write failed");
}

namespace {

const nlohmann::json& member(const nlohmann::json& obj, const char* key, const std::string& where,
                             const std::string& file) {
  if (!obj.is_object()) throw model::ConfigError(file, 0, where, "expected a JSON object");
  auto it = obj.find(key);
  if (it == obj.end()) throw model::ConfigError(file, 0, where + "." + key, "missing");
  return *it;
}

// Every key of `obj` is one of `allowed`: a key the reader does not know may change what the flows
// mean (the --dump-flows contract, flow_io.hpp), so it is refused rather than skipped.
void allow_only(const nlohmann::json& obj, std::initializer_list<const char*> allowed, const std::string& where,
                const std::string& file) {
  if (!obj.is_object()) throw model::ConfigError(file, 0, where, "expected a JSON object");
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& key = it.key();
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    throw model::ConfigError(file, 0, where.empty() ? key : where + "." + key, "unknown key; allowed here: " + list);
  }
}

double number(const nlohmann::json& v, const std::string& key, const std::string& file) {
  return model::checked::finite(v, {file, key});
}

std::int64_t integer(const nlohmann::json& v, const std::string& key, const std::string& file,
                     std::int64_t lo = 0, std::int64_t hi = std::numeric_limits<std::int64_t>::max()) {
  return model::checked::integer(v, {file, key}, lo, hi);
}

}  // namespace

FlowDump flow_dump_from_json(const nlohmann::json& j, const std::string& file) {
  FlowDump d;
  allow_only(j, {"links", "flows"}, "", file);
  const auto& links = member(j, "links", "", file);
  if (!links.is_array()) throw model::ConfigError(file, 0, "links", "expected an array");
  for (std::size_t l = 0; l < links.size(); ++l) {
    const std::string where = "links[" + std::to_string(l) + "]";
    allow_only(links[l], {"id", "capacity_Bps"}, where, file);
    const auto id = integer(member(links[l], "id", where, file), where + ".id", file);
    if (id != static_cast<std::int64_t>(l))
      throw model::ConfigError(file, 0, where + ".id", "link ids must be 0..n-1 in order; expected " +
                                                          std::to_string(l) + ", got " + std::to_string(id));
    const double cap = number(member(links[l], "capacity_Bps", where, file), where + ".capacity_Bps", file);
    if (!(cap > 0)) throw model::ConfigError(file, 0, where + ".capacity_Bps", "must be positive");
    d.network.capacity.push_back(BytesPerSecond{cap});
  }
  const auto& flows = member(j, "flows", "", file);
  if (!flows.is_array()) throw model::ConfigError(file, 0, "flows", "expected an array");
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const std::string where = "flows[" + std::to_string(i) + "]";
    const auto& fj = flows[i];
    allow_only(fj, {"id", "bytes", "links", "latency_s", "after", "release_s", "start_s", "finish_s"}, where, file);
    FlowSpec f;
    f.id = integer(member(fj, "id", where, file), where + ".id", file);
    f.bytes = ByteAmount{number(member(fj, "bytes", where, file), where + ".bytes", file)};
    const auto& lk = member(fj, "links", where, file);
    if (!lk.is_array()) throw model::ConfigError(file, 0, where + ".links", "expected an array of link ids");
    const auto link_max = static_cast<std::int64_t>(d.network.capacity.size()) - 1;
    for (std::size_t k = 0; k < lk.size(); ++k)
      f.links.push_back(static_cast<std::int32_t>(
          integer(lk[k], where + ".links[" + std::to_string(k) + "]", file, 0, link_max)));
    f.latency = Seconds{fj.contains("latency_s") ? number(fj["latency_s"], where + ".latency_s", file) : 0.0};
    if (fj.contains("after")) {
      if (!fj["after"].is_array()) throw model::ConfigError(file, 0, where + ".after", "expected an array of flow ids");
      for (std::size_t k = 0; k < fj["after"].size(); ++k)
        f.after.push_back(integer(fj["after"][k], where + ".after[" + std::to_string(k) + "]", file));
    }
    FlowTiming t;
    if (fj.contains("release_s")) t.release = Seconds{number(fj["release_s"], where + ".release_s", file)};
    if (fj.contains("start_s")) t.start = Seconds{number(fj["start_s"], where + ".start_s", file)};
    if (fj.contains("finish_s")) t.finish = Seconds{number(fj["finish_s"], where + ".finish_s", file)};
    d.flows.push_back(std::move(f));
    d.recorded.push_back(t);
  }
  return d;
}

FlowDump read_flow_dump(const std::filesystem::path& path) {
  return flow_dump_from_json(model::read_json_file(path, "flow dump"), path.string());
}

}  // namespace reshard::sim
