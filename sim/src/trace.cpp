#include "reshard/sim/trace.hpp"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <ostream>

#include <nlohmann/json.hpp>

#include "reshard/model/errors.hpp"
#include "reshard/sim/flow_io.hpp"

namespace reshard::sim {

void write_chrome_trace(std::ostream& out, const FlowNetwork& network, const std::vector<FlowSpec>& flows,
                        const FlowSimResult& result, const TraceLayout& layout) {
  constexpr double us = 1e6;
  nlohmann::json events = nlohmann::json::array();
  const std::size_t tracks = layout.track_names.size();
  // Flows per track, sorted by start, placed on the first lane that is free again.
  std::vector<std::vector<std::size_t>> on_track(tracks);
  for (std::size_t i = 0; i < flows.size() && i < layout.flow_tracks.size(); ++i)
    for (auto t : layout.flow_tracks[i])
      if (t >= 0 && static_cast<std::size_t>(t) < tracks) on_track[t].push_back(i);
  for (std::size_t t = 0; t < tracks; ++t) {
    const int pid = static_cast<int>(t) + 1;
    events.push_back({{"ph", "M"}, {"pid", pid}, {"name", "process_name"}, {"args", {{"name", layout.track_names[t]}}}});
    events.push_back({{"ph", "M"}, {"pid", pid}, {"name", "process_sort_index"}, {"args", {{"sort_index", pid}}}});
    auto& list = on_track[t];
    std::stable_sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
      return result.timing[a].start < result.timing[b].start;
    });
    std::vector<double> lane_end;
    for (auto i : list) {
      const FlowTiming& ft = result.timing[i];
      std::size_t lane = 0;
      while (lane < lane_end.size() && lane_end[lane] > ft.start.value) ++lane;
      if (lane == lane_end.size()) lane_end.push_back(0);
      lane_end[lane] = ft.finish.value;
      std::string name = i < layout.flow_names.size() && !layout.flow_names[i].empty() ? layout.flow_names[i]
                         : !flows[i].label.empty()                                      ? flows[i].label
                                                                                       : "flow " + std::to_string(flows[i].id);
      nlohmann::json args = {{"id", flows[i].id},
                             {"bytes", bytes_json(flows[i].bytes)},
                             {"release_s", ft.release.value},
                             {"latency_s", flows[i].latency.value}};
      if (ft.bottleneck >= 0) args["bottleneck"] = network.link_name(ft.bottleneck);
      events.push_back({{"ph", "X"},
                        {"pid", pid},
                        {"tid", lane},
                        {"name", std::move(name)},
                        {"ts", ft.start.value * us},
                        {"dur", (ft.finish - ft.start).value * us},
                        {"args", std::move(args)}});
    }
  }
  // Utilization counters per link group: allocated rate over the group's total capacity.
  if (!layout.link_group.empty() && layout.link_group.size() == network.capacity.size()) {
    std::vector<double> group_capacity(layout.group_names.size(), 0.0);
    for (std::size_t l = 0; l < layout.link_group.size(); ++l) {
      const auto g = layout.link_group[l];
      if (g >= 0 && static_cast<std::size_t>(g) < group_capacity.size()) group_capacity[g] += network.capacity[l].value;
    }
    const int pid = static_cast<int>(tracks) + 1;
    events.push_back({{"ph", "M"}, {"pid", pid}, {"name", "process_name"}, {"args", {{"name", "link utilization"}}}});
    for (const auto& s : result.group_timeline) {
      if (s.group < 0 || static_cast<std::size_t>(s.group) >= group_capacity.size() || group_capacity[s.group] <= 0)
        continue;
      events.push_back({{"ph", "C"},
                        {"pid", pid},
                        {"name", layout.group_names[s.group] + " utilization %"},
                        {"ts", s.time.value * us},
                        {"args", {{"percent", 100.0 * s.rate.value / group_capacity[s.group]}}}});
    }
  }
  out << nlohmann::json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}}.dump() << '\n';
}

void write_chrome_trace(const std::filesystem::path& path, const FlowNetwork& network,
                        const std::vector<FlowSpec>& flows, const FlowSimResult& result, const TraceLayout& layout) {
  std::ofstream out(path);
  if (!out) throw model::ConfigError(path.string(), 0, "", "cannot open the trace file for writing");
  write_chrome_trace(out, network, flows, result, layout);
  if (!out) throw model::ConfigError(path.string(), 0, "", "write failed");
}

}  // namespace reshard::sim
