#include "reshard/sim/traffic.hpp"

#include <charconv>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "reshard/model/checked.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/json_file.hpp"

namespace reshard::sim {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t begin = 0;
  while (true) {
    const auto end = s.find(sep, begin);
    parts.push_back(trim(s.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin)));
    if (end == std::string_view::npos) break;
    begin = end + 1;
  }
  return parts;
}

std::int64_t parse_int(std::string_view s, const std::string& file, int line, const std::string& column) {
  const auto v = model::checked::parse_integer(s);
  if (!v) throw model::ConfigError(file, line, column, "expected an integer, got " + model::checked::quote(s));
  return *v;
}

// A GPU index: an integer that fits a GpuId (whether the topology has it is checked with the topology).
model::GpuId parse_gpu(std::string_view s, const std::string& file, int line, const std::string& column) {
  const auto v = parse_int(s, file, line, column);
  if (v < -1 || v >= model::kMaxGpus)
    throw model::ConfigError(file, line, column, "GPU " + model::checked::cut(s) + " is not an index in 0.." +
                                                     std::to_string(model::kMaxGpus - 1));
  return static_cast<model::GpuId>(v);
}

}  // namespace

std::vector<Transfer> read_transfers_csv(const std::filesystem::path& path) {
  const std::string file = path.string();
  model::check_input_file(path, "flows file");
  std::ifstream in(path);
  if (!in) throw model::ConfigError(file, 0, "", "cannot open the flows file");
  std::string text;
  int line = 0;
  bool header = false;
  std::vector<Transfer> out;
  while (std::getline(in, text)) {
    ++line;
    const std::string_view row = trim(text);
    if (row.empty() || row.front() == '#') continue;
    const auto cols = split(row, ',');
    if (!header) {
      const bool ok = (cols.size() == 4 || cols.size() == 5) && cols[0] == "id" && cols[1] == "src" &&
                      cols[2] == "dst" && cols[3] == "bytes" && (cols.size() == 4 || cols[4] == "after");
      if (!ok)
        throw model::ConfigError(file, line, "header",
                                 "expected the header 'id,src,dst,bytes' or 'id,src,dst,bytes,after', got " +
                                     model::checked::quote(row));
      header = true;
      continue;
    }
    if (cols.size() < 4 || cols.size() > 5)
      throw model::ConfigError(file, line, "", "expected 4 or 5 columns (id,src,dst,bytes[,after]), got " +
                                                   std::to_string(cols.size()));
    Transfer t;
    t.line = line;
    t.id = parse_int(cols[0], file, line, "id");
    t.src = parse_gpu(cols[1], file, line, "src");
    t.dst = parse_gpu(cols[2], file, line, "dst");
    const auto b = cols[3];
    if (!b.empty() && b.find_first_not_of("0123456789") == std::string_view::npos) {
      t.bytes = Bytes{parse_int(b, file, line, "bytes")};
    } else {
      try {
        t.bytes = model::parse_size(b);
      } catch (const std::invalid_argument& e) {
        throw model::ConfigError(file, line, "bytes", e.what());
      }
    }
    if (cols.size() == 5 && !cols[4].empty())
      for (auto a : split(cols[4], ';')) t.after.push_back(parse_int(a, file, line, "after"));
    out.push_back(std::move(t));
  }
  if (!header) throw model::ConfigError(file, 0, "header", "the file is empty; expected 'id,src,dst,bytes[,after]'");
  return out;
}

TrafficFlows traffic_flows(const model::Topology& topology, const std::vector<Transfer>& transfers,
                           const std::string& source_name) {
  TrafficFlows tf;
  const auto& links = topology.links();
  for (const auto& l : links) {
    tf.network.capacity.push_back(l.bandwidth);
    tf.network.link_names.push_back(topology.device(l.from).name + "->" + topology.device(l.to).name);
    tf.link_group.push_back(static_cast<std::int32_t>(l.kind));
  }
  for (auto k : {model::LinkKind::NVLink, model::LinkKind::C2C, model::LinkKind::PCIe, model::LinkKind::Network})
    tf.group_names.push_back(model::to_string(k));

  auto fail = [&](const Transfer& t, const std::string& column, const std::string& what) {
    throw model::ConfigError(source_name, t.line, column, "transfer " + std::to_string(t.id) + ": " + what);
  };
  // First pass: sub-flows and the flow ids of each transfer.
  std::unordered_map<std::int64_t, std::size_t> index;
  std::vector<std::pair<std::int64_t, std::int64_t>> flow_range(transfers.size());  // [first, last) flow ids
  const auto gpus = topology.gpu_count();
  for (std::size_t i = 0; i < transfers.size(); ++i) {
    const Transfer& t = transfers[i];
    if (!index.emplace(t.id, i).second) fail(t, "id", "duplicate id");
    if (t.src < 0 || t.src >= gpus) fail(t, "src", "GPU " + std::to_string(t.src) + " is not in the topology (0.." + std::to_string(gpus - 1) + ")");
    if (t.dst < 0 || t.dst >= gpus) fail(t, "dst", "GPU " + std::to_string(t.dst) + " is not in the topology (0.." + std::to_string(gpus - 1) + ")");
    if (t.src == t.dst) fail(t, "dst", "source and destination are the same GPU " + std::to_string(t.src));
    if (t.bytes.value < 0) fail(t, "bytes", "negative size");
    const model::Route route = topology.route(t.src, t.dst);
    if (route.paths.empty()) fail(t, "dst", "no route from GPU " + std::to_string(t.src) + " to GPU " + std::to_string(t.dst));
    const auto k = static_cast<std::int64_t>(route.paths.size());
    flow_range[i].first = static_cast<std::int64_t>(tf.flows.size());
    for (std::int64_t p = 0; p < k; ++p) {
      FlowSpec f;
      f.id = static_cast<std::int64_t>(tf.flows.size());
      f.bytes = ByteAmount{t.bytes.as_double() / static_cast<double>(k)};  // equal shares (docs/design.md §9)
      f.links = route.paths[p].links;
      f.latency = route.latency;
      f.label = "transfer " + std::to_string(t.id) + " gpu" + std::to_string(t.src) + "->gpu" + std::to_string(t.dst);
      if (k > 1) f.label += " path " + std::to_string(p + 1) + "/" + std::to_string(k);
      tf.flows.push_back(std::move(f));
      tf.transfer_of.push_back(i);
    }
    flow_range[i].second = static_cast<std::int64_t>(tf.flows.size());
  }
  // Second pass: dependencies on every sub-flow of each predecessor.
  for (std::size_t i = 0; i < transfers.size(); ++i) {
    std::vector<std::int64_t> after;
    for (auto a : transfers[i].after) {
      auto it = index.find(a);
      if (it == index.end()) fail(transfers[i], "after", "waits for unknown transfer id " + std::to_string(a));
      for (auto f = flow_range[it->second].first; f < flow_range[it->second].second; ++f) after.push_back(f);
    }
    for (auto f = flow_range[i].first; f < flow_range[i].second; ++f) tf.flows[f].after = after;
  }
  return tf;
}

TraceLayout traffic_trace_layout(const model::Topology& topology, const std::vector<Transfer>& transfers,
                                 const TrafficFlows& traffic) {
  TraceLayout layout;
  for (model::GpuId g = 0; g < topology.gpu_count(); ++g)
    layout.track_names.push_back("gpu " + std::to_string(g) + " (" + topology.device(topology.gpu_device(g)).name + ")");
  for (std::size_t f = 0; f < traffic.flows.size(); ++f) {
    const Transfer& t = transfers[traffic.transfer_of[f]];
    layout.flow_tracks.push_back({t.src, t.dst});
  }
  layout.link_group = traffic.link_group;
  layout.group_names = traffic.group_names;
  return layout;
}

}  // namespace reshard::sim
