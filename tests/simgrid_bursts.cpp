#include "simgrid_bursts.hpp"

#include <algorithm>
#include <random>
#include <string>

#include "reshard/model/topology.hpp"
#include "reshard/sim/traffic.hpp"

namespace reshard::simgrid_check {

using model::Bytes;
using model::BytesPerSecond;
using model::Seconds;

Burst synthetic_burst(int gpus, int flows, std::uint64_t seed) {
  Burst b;
  auto add_link = [&](double cap, std::string name) {
    b.network.capacity.push_back(BytesPerSecond{cap});
    b.network.link_names.push_back(std::move(name));
    return static_cast<std::int32_t>(b.network.capacity.size() - 1);
  };
  const int leaves = std::max(1, (gpus + 31) / 32);
  constexpr int kSpines = 4;
  std::vector<std::int32_t> nvl_out(gpus), nvl_in(gpus), nic_out(gpus), nic_in(gpus);
  for (int g = 0; g < gpus; ++g) {
    nvl_out[g] = add_link(450e9, "gpu" + std::to_string(g) + "->nvswitch");
    nvl_in[g] = add_link(450e9, "nvswitch->gpu" + std::to_string(g));
    nic_out[g] = add_link(50e9, "gpu" + std::to_string(g) + "->leaf");
    nic_in[g] = add_link(50e9, "leaf->gpu" + std::to_string(g));
  }
  // 32 GPUs x 50 GB/s under a leaf, 4 uplinks of 200 GB/s: 2:1 oversubscribed.
  std::vector<std::vector<std::int32_t>> up(leaves), down(leaves);
  for (int l = 0; l < leaves; ++l)
    for (int s = 0; s < kSpines; ++s) {
      up[l].push_back(add_link(200e9, "leaf" + std::to_string(l) + "->spine" + std::to_string(s)));
      down[l].push_back(add_link(200e9, "spine" + std::to_string(s) + "->leaf" + std::to_string(l)));
    }
  std::mt19937_64 rng(seed);
  std::int64_t id = 0;
  for (int i = 0; i < flows; ++i) {
    const int a = static_cast<int>(rng() % gpus);
    int c = static_cast<int>(rng() % (gpus - 1));
    if (c >= a) ++c;
    const std::int64_t bytes = 1000000 + static_cast<std::int64_t>(rng() % 999000000);
    const std::string label = "gpu" + std::to_string(a) + "->gpu" + std::to_string(c);
    if (a / 8 == c / 8) {
      b.flows.push_back({id++, Bytes{bytes}, {nvl_out[a], nvl_in[c]}, Seconds{0}, {}, label});
    } else if (a / 32 == c / 32) {
      b.flows.push_back({id++, Bytes{bytes}, {nic_out[a], nic_in[c]}, Seconds{0}, {}, label});
    } else {
      for (int s = 0; s < kSpines; ++s)
        b.flows.push_back({id++, Bytes{bytes / kSpines}, {nic_out[a], up[a / 32][s], down[c / 32][s], nic_in[c]},
                           Seconds{0}, {}, label + " ecmp" + std::to_string(s)});
    }
  }
  return b;
}

Burst topology_burst(const std::string& topology_file, int transfers, std::uint64_t seed, int min_flows) {
  const auto topo = model::Topology::load(topology_file);
  std::mt19937_64 rng(seed);
  std::vector<sim::Transfer> list;
  const auto gpus = topo.gpu_count();
  std::int64_t flows = 0;
  for (int i = 0; i < transfers || flows < min_flows; ++i) {
    sim::Transfer t;
    t.id = i;
    t.src = static_cast<model::GpuId>(rng() % gpus);
    t.dst = static_cast<model::GpuId>(rng() % (gpus - 1));
    if (t.dst >= t.src) ++t.dst;
    // A multiple of 20160 (divisible by 1-8, 16, 32 and 64): every ECMP share is whole, as
    // SimGrid's payloads are.
    t.bytes = Bytes{(1000000 + static_cast<std::int64_t>(rng() % 999000000)) / 20160 * 20160};
    flows += static_cast<std::int64_t>(topo.route(t.src, t.dst).paths.size());
    list.push_back(t);
  }
  auto traffic = sim::traffic_flows(topo, list, topology_file);
  Burst b;
  b.network = std::move(traffic.network);
  b.flows = std::move(traffic.flows);
  for (auto& f : b.flows) f.latency = Seconds{0};
  return b;
}

Burst random_link_burst(int links, int flows, std::uint64_t seed) {
  Burst b;
  std::mt19937_64 rng(seed);
  for (int l = 0; l < links; ++l) b.network.capacity.push_back(BytesPerSecond{1e9 * (1 + static_cast<double>(rng() % 100))});
  for (int i = 0; i < flows; ++i) {
    std::vector<std::int32_t> set;
    const int k = 1 + static_cast<int>(rng() % 5);
    while (static_cast<int>(set.size()) < k) {
      const auto l = static_cast<std::int32_t>(rng() % links);
      if (std::find(set.begin(), set.end(), l) == set.end()) set.push_back(l);
    }
    b.flows.push_back({i, Bytes{1000000 + static_cast<std::int64_t>(rng() % 999000000)}, set, Seconds{0}, {}, ""});
  }
  return b;
}

}  // namespace reshard::simgrid_check
