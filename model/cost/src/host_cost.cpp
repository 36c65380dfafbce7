#include "reshard/model/host_cost.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "reshard/model/errors.hpp"
#include "reshard/model/memory.hpp"
#include "reshard/model/yaml_reader.hpp"

namespace reshard::model {

namespace {

constexpr const char* kKeys[] = {"profile",       "machine",        "cores",           "processes", "copy_rate",
                                 "copy_rate_all", "touch_rate_all",  "transport_rate", "transport_rate_all", "connect_time",
                                 "message_time", "message_latency", "barrier"};

BytesPerSecond positive_rate(const yaml::Node& n) {
  const BytesPerSecond r = n.bandwidth();
  if (!(r.value > 0)) n.fail("must be a positive rate (e.g. 12.5GBps)");
  return r;
}

Seconds positive_time(const yaml::Node& n) {
  const Seconds s = n.duration();
  if (!(s.value > 0) || !std::isfinite(s.value)) n.fail("must be a positive duration (e.g. 85us)");
  return s;
}

// A rate as the file writes it: GB/s with enough digits to read back within 1e-6.
std::string rate_text(BytesPerSecond r) {
  std::ostringstream os;
  os.precision(9);
  os << r.value / 1e9 << "GBps";
  return os.str();
}

std::string time_text(Seconds s) {
  std::ostringstream os;
  os.precision(9);
  os << s.value * 1e6 << "us";
  return os.str();
}

}  // namespace

bool HostProfile::is_host_profile(const std::filesystem::path& path) {
  const auto root = yaml::load_file(path);
  const auto profile = root.get("profile");
  return profile && profile->is_scalar() && profile->str() == "host";
}

HostProfile HostProfile::load(const std::filesystem::path& path) {
  const auto root = yaml::load_file(path);
  root.allow_only({std::begin(kKeys), std::end(kKeys)});
  HostProfile p;
  const auto profile = root.at("profile");
  if (profile.str() != "host")
    profile.fail("'" + profile.str() + "': a host profile says 'profile: host' (written by reshard bench-host)");
  p.machine = root.at("machine").str();
  p.cores = static_cast<std::int32_t>(root.at("cores").integer_in(1, 1 << 20));
  p.processes = static_cast<std::int32_t>(root.at("processes").integer_in(1, 1 << 20));
  p.copy_rate = positive_rate(root.at("copy_rate"));
  p.copy_rate_all = positive_rate(root.at("copy_rate_all"));
  p.touch_rate_all = positive_rate(root.at("touch_rate_all"));
  p.transport_rate = positive_rate(root.at("transport_rate"));
  p.transport_rate_all = positive_rate(root.at("transport_rate_all"));
  p.connect_time = positive_time(root.at("connect_time"));
  p.message_time = positive_time(root.at("message_time"));
  p.message_latency = positive_time(root.at("message_latency"));
  p.barrier = positive_time(root.at("barrier"));
  return p;
}

namespace {

// One hop of an op: from GPU a to GPU b.
struct Hop {
  GpuId from, to;
};

std::vector<Hop> hops_of(const Schedule& s, const Op& o) {
  std::vector<Hop> out;
  if (o.chain < 0) {
    if (o.src != o.dst) out.push_back({o.src, o.dst});
    return out;
  }
  for (const ChainHop& h : s.chains[static_cast<std::size_t>(o.chain)].hops) out.push_back({h.from, h.to});
  return out;
}

// The depth of an op's tree: 1 for a transfer, the longest root-to-leaf hop count for a chain
// (every hop's `from` is the root or an earlier hop's `to`, model::Chain).
std::int32_t depth_of(const std::vector<Hop>& hops) {
  std::unordered_map<GpuId, std::int32_t> at;  // GPU -> hops from the root
  std::int32_t deepest = hops.empty() ? 0 : 1;
  for (const Hop& h : hops) {
    const auto it = at.find(h.from);
    const std::int32_t d = it == at.end() ? 1 : it->second + 1;
    at[h.to] = d;
    deepest = std::max(deepest, d);
  }
  return deepest;
}

}  // namespace

// Stays whole: the host model's terms per step (machine, process, path, open) are sums over the
// same per-step, per-process tables, filled in one pass over the ops and read once at the end.
HostPrediction estimate_host(const Schedule& s, const std::vector<GpuId>& gpus, std::int32_t processes,
                             const HostProfile& prof) {
  if (processes < 1) throw PlanError("a host run needs at least one process, not " + std::to_string(processes));
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    if (const std::string why = op_problem(s, i, -1, false); !why.empty()) throw ScheduleError(why);
  GpuId most = -1;
  for (GpuId g : gpus) most = std::max(most, g);
  std::vector<std::int32_t> process(static_cast<std::size_t>(most + 1), -1);
  for (std::size_t i = 0; i < gpus.size(); ++i) process[static_cast<std::size_t>(gpus[i])] = static_cast<std::int32_t>(i % static_cast<std::size_t>(processes));
  auto proc = [&](GpuId g, std::int64_t op) {
    if (g < 0 || g > most || process[static_cast<std::size_t>(g)] < 0)
      throw ScheduleError("operation " + std::to_string(op) + " names GPU " + std::to_string(g) + ", which is not one of the run's " +
                          std::to_string(gpus.size()) + " GPUs");
    return process[static_cast<std::size_t>(g)];
  };
  std::int32_t count = 0;
  const std::vector<std::int32_t> step = op_steps(s, count);
  const auto kept = kept_receives(s);
  // last[a]: per GPU keeping op a's receive, the largest step of the ops there that forward from it.
  std::vector<std::vector<std::pair<GpuId, std::int32_t>>> last(s.ops.size());
  for (std::size_t a = 0; a < s.ops.size(); ++a)
    for (GpuId g : kept[a]) last[a].push_back({g, step[a]});
  for (const Op& x : s.ops)
    for (auto a : s.after_of(x))
      for (auto& [g, l] : last[static_cast<std::size_t>(a)])
        if (g == x.src) l = std::max(l, step[static_cast<std::size_t>(x.id)]);

  const auto P = static_cast<std::size_t>(processes);
  const double shared = std::min(prof.processes, prof.cores);  // the cores the benchmark's processes shared
  const double f = shared / std::min<double>(processes, prof.cores);
  const double lambda = prof.message_latency.value;
  // Staging each GPU holds per step (model/memory.hpp's footprint): a ring per role, the whole part
  // for a kept receive, from its step to the last that forwards from it. index: position in `gpus`.
  std::vector<std::size_t> index(static_cast<std::size_t>(most + 1), 0);
  for (std::size_t i = 0; i < gpus.size(); ++i) index[static_cast<std::size_t>(gpus[i])] = i;
  std::vector<std::vector<std::int64_t>> live(gpus.size(), std::vector<std::int64_t>(static_cast<std::size_t>(count), 0));
  std::vector<std::int32_t> first(gpus.size(), count);  // per GPU: its first step with an operation
  std::vector<std::vector<std::size_t>> ops_of(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& o = s.ops[i];
    const auto k = static_cast<std::size_t>(step[i]);
    ops_of[k].push_back(i);
    const std::int64_t ring = ring_bytes(s, o).value;
    auto hold = [&](GpuId g, std::size_t at, std::int64_t bytes) {
      proc(g, o.id);  // a GPU of the run
      const std::size_t x = index[static_cast<std::size_t>(g)];
      live[x][at] += bytes;
      first[x] = std::min(first[x], step[i]);
    };
    hold(o.src, k, ring);
    for (const Hop& h : hops_of(s, o)) {
      auto it = std::find_if(last[i].begin(), last[i].end(), [&](const auto& e) { return e.first == h.to; });
      if (it == last[i].end()) hold(h.to, k, ring);
      else
        for (std::int32_t j = step[i]; j <= it->second; ++j) hold(h.to, static_cast<std::size_t>(j), o.bytes.value);
    }
  }
  // A GPU's first step is allocated before the clock starts (the backend opens it while it sets up);
  // a process's heap reuses what it freed, so a later step touches fresh memory only where the
  // process's staging exceeds its high-water mark.
  std::vector<std::int64_t> high(P, 0);
  for (std::size_t i = 0; i < gpus.size(); ++i)
    if (first[i] < count) high[i % P] += live[i][static_cast<std::size_t>(first[i])];

  HostPrediction out;
  out.processes = processes;
  std::vector<char> met(P * P, 0);       // ordered process pairs that have exchanged a message
  for (std::int32_t k = 0; k < count; ++k) {
    HostStep st;
    st.step = k;
    st.ops = static_cast<std::int64_t>(ops_of[static_cast<std::size_t>(k)].size());
    std::vector<double> xp(P, 0), yp(P, 0), ap(P, 0), kp(P, 0);
    std::vector<std::int64_t> need(P, 0);
    for (std::size_t i = 0; i < gpus.size(); ++i)
      if (k >= first[i]) need[i % P] += live[i][static_cast<std::size_t>(k)];
    double open = 0;  // T_open: the slowest process's fresh staging, before its sends of the step go
    for (std::size_t p = 0; p < P; ++p) {
      if (need[p] > high[p]) ap[p] = static_cast<double>(need[p] - high[p]);
      high[p] = std::max(high[p], need[p]);
      st.touched.value += static_cast<std::int64_t>(ap[p]);
      open = std::max(open, ap[p] / prof.touch_rate_all.value * shared);
    }
    // The dependent paths: per chain (its ops in this step follow each other), or per transfer.
    std::vector<std::pair<std::int32_t, double>> chain_bytes;  // chain -> bytes of its ops here
    double path = 0;
    for (std::size_t i : ops_of[static_cast<std::size_t>(k)]) {
      const Op& o = s.ops[i];
      const double B = o.bytes.as_double();
      const std::int64_t c = std::max<std::int64_t>(stream_chunk(s, o).value, 1);
      const std::int64_t chunks = o.bytes.value > 0 ? (o.bytes.value + c - 1) / c : 0;
      const auto hops = hops_of(s, o);
      const auto root = static_cast<std::size_t>(proc(o.src, o.id));
      yp[root] += B;  // pack
      bool across = false;  // a hop between two processes
      for (const Hop& h : hops) {
        const auto a = static_cast<std::size_t>(proc(h.from, o.id)), b = static_cast<std::size_t>(proc(h.to, o.id));
        yp[b] += B;  // unpack
        if (a == b) {
          yp[b] += B;  // MPI copies it within the process
          continue;
        }
        across = true;
        xp[b] += B;
        st.messages += chunks;
        if (!met[a * P + b]) {
          met[a * P + b] = 1;
          kp[b] += 1;
          ++st.pairs;
        }
      }
      const std::int32_t H = depth_of(hops);
      if (H == 0) continue;  // a local copy
      double bytes = B;
      if (o.chain >= 0) {
        auto it = std::find_if(chain_bytes.begin(), chain_bytes.end(), [&](const auto& e) { return e.first == o.chain; });
        if (it == chain_bytes.end()) chain_bytes.push_back({o.chain, B});
        else bytes = it->second += B;
      }
      const double fill = static_cast<double>((H - 1) * std::min<std::int64_t>(c, o.bytes.value));
      path = std::max(path, across ? H * lambda + (bytes + fill) / prof.transport_rate.value
                                   : (bytes + fill) / prof.copy_rate.value);
    }
    double x = 0, y = 0, proc_most = 0;
    for (std::size_t p = 0; p < P; ++p) {
      x += xp[p];
      y += yp[p];
      proc_most = std::max(proc_most, xp[p] / prof.transport_rate.value + yp[p] / prof.copy_rate.value +
                                          kp[p] * prof.connect_time.value * shared);
    }
    st.transported = Bytes{static_cast<std::int64_t>(x)};
    st.copied = Bytes{static_cast<std::int64_t>(y)};
    st.machine = Seconds{f * (x / prof.transport_rate_all.value + y / prof.copy_rate_all.value +
                              static_cast<double>(st.pairs) * prof.connect_time.value +
                              static_cast<double>(st.messages) * prof.message_time.value)};
    st.process = Seconds{proc_most};
    st.path = Seconds{path};
    st.open = Seconds{open};
    st.time = st.open + std::max({st.machine, st.process, st.path});
    out.time += st.time;
    out.steps.push_back(st);
  }
  if (count > 1) out.time += Seconds{(count - 1) * lambda};
  return out;
}

void HostProfile::save(const std::filesystem::path& path) const {
  std::ofstream f(path);
  if (!f) throw ConfigError(path.string(), 0, "", "cannot write the host profile");
  f << "# The host backend's cost profile, measured by `mpirun -np " << processes
    << " reshard bench-host` on this machine\n"
       "# (exec/host_bench.hpp); read by `reshard check MEASUREMENT --params FILE` for host-backend runs\n"
       "# (model/host_cost.hpp). Nothing here is fitted to a run.\n"
    << "profile: host\n"
    << "# The machine it was measured on (a note).\n"
    << "machine: \"" << machine << "\"\n"
    << "# CPUs the processes may run on (sched_getaffinity).\n"
    << "cores: " << cores << "\n"
    << "# Processes the benchmark ran (mpirun -np N): the other constants are measured with N processes alive.\n"
    << "processes: " << processes << "\n"
    << "# memcpy of 8 MiB by one process while the others idle: bytes copied per second.\n"
    << "copy_rate: " << rate_text(copy_rate) << "\n"
    << "# memcpy by all N processes at once: their bytes from the first start to the last end.\n"
    << "copy_rate_all: " << rate_text(copy_rate_all) << "\n"
    << "# Writing memory the process has never used (fresh pages, as a heap that grows), all N processes at\n"
       "# once: their bytes from the first start to the last end.\n"
    << "touch_rate_all: " << rate_text(touch_rate_all) << "\n"
    << "# MPI_Isend/MPI_Irecv of 512 KiB chunks, 8 in flight, from one process to another while the others\n"
       "# idle, each chunk in memory allocated and zeroed just before (as a run's staging): bytes per second.\n"
    << "transport_rate: " << rate_text(transport_rate) << "\n"
    << "# A 512 KiB chunk from every process to every other one at once, fresh memory: the bytes over the time\n"
       "# beyond what as many small messages take (message_time each, below).\n"
    << "transport_rate_all: " << rate_text(transport_rate_all) << "\n"
    << "# A pair of processes' first message in a launch (MPI sets up the pair's transport then): a chunk from\n"
       "# every process to every other one as their first message, beyond the same exchange again, over the\n"
       "# ordered pairs (N (N - 1)).\n"
    << "connect_time: " << time_text(connect_time) << "\n"
    << "# A small message once every pair is set up, every process sending to every other one at once: the\n"
       "# time from the first start to the last end over the messages.\n"
    << "message_time: " << time_text(message_time) << "\n"
    << "# One-way time of a small message (a ping-pong's round trip / 2) between two processes that poll\n"
       "# as the host backend does (MPI_Testall, a 20 us sleep when nothing moved), the others idling.\n"
    << "message_latency: " << time_text(message_latency) << "\n"
    << "# MPI_Barrier over the N processes.\n"
    << "barrier: " << time_text(barrier) << "\n";
}

}  // namespace reshard::model
