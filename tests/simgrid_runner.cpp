#include "simgrid_runner.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

namespace reshard::simgrid_check {

namespace sg4 = simgrid::s4u;

namespace {

// "l12" etc. Built by appending: GCC 12 flags "literal" + std::string with a false -Wrestrict.
std::string numbered(const char* prefix, std::size_t i) {
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

// Runs in the child: builds the platform, simulates, fills `out` (finish times, then the two walls).
void simulate_in_child(const sim::FlowNetwork& network, const std::vector<sim::FlowSpec>& flows,
                       std::vector<double>& out) {
  int argc = 1;
  char name[] = "simgrid_runner";
  char* argv[] = {name, nullptr};
  xbt_log_control_set("root.thresh:critical");
  sg4::Engine engine(&argc, argv);
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/TCP-gamma:0");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/weight-S:0");
  sg4::Engine::set_config("network/latency-factor:1");
  sg4::Engine::set_config("network/bandwidth-factor:1");
  // SimGrid rounds to 1e-9 s ("surf/precision") and 1e-5 of a rate ("maxmin/precision") by default;
  // sub-microsecond transfers on 400 Gb/s links need finer steps to be compared at 1e-6 relative.
  sg4::Engine::set_config("surf/precision:1e-13");
  sg4::Engine::set_config("maxmin/precision:1e-11");

  const auto setup_start = std::chrono::steady_clock::now();
  auto* root = sg4::create_empty_zone("root");
  std::vector<const sg4::Link*> links;
  links.reserve(network.capacity.size());
  for (std::size_t l = 0; l < network.capacity.size(); ++l)
    links.push_back(root->create_link(numbered("l", l), network.capacity[l].value)->set_latency(0)->seal());
  std::vector<std::pair<sg4::Host*, sg4::Host*>> pairs;
  pairs.reserve(flows.size());
  for (std::size_t i = 0; i < flows.size(); ++i) {
    auto* zone = sg4::create_full_zone(numbered("z", i));
    zone->set_parent(root);
    auto* src = zone->create_host(numbered("s", i), 1e9)->seal();
    auto* dst = zone->create_host(numbered("d", i), 1e9)->seal();
    std::vector<sg4::LinkInRoute> route;
    for (auto l : flows[i].links) route.emplace_back(links[l]);
    zone->add_route(src->get_netpoint(), dst->get_netpoint(), nullptr, nullptr, route, false);
    zone->seal();
    pairs.emplace_back(src, dst);
  }
  root->seal();
  const double setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();

  out.assign(flows.size(), -1.0);
  sg4::Actor::create("driver", pairs.front().first, [&] {
    std::vector<sg4::CommPtr> comms;
    comms.reserve(flows.size());
    for (std::size_t i = 0; i < flows.size(); ++i)
      comms.push_back(sg4::Comm::sendto_async(pairs[i].first, pairs[i].second,
                                              static_cast<std::uint64_t>(std::llround(flows[i].bytes.value))));
    sg4::Comm::wait_all(comms);
    for (std::size_t i = 0; i < flows.size(); ++i) out[i] = comms[i]->get_finish_time();
  });
  const auto run_start = std::chrono::steady_clock::now();
  engine.run();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  out.push_back(wall_s);
  out.push_back(setup_s);
}

}  // namespace

SimgridRun run_simgrid(const sim::FlowNetwork& network, const std::vector<sim::FlowSpec>& flows) {
  for (const auto& f : flows)
    if (!f.after.empty() || f.latency.value != 0 || f.links.empty())
      throw std::runtime_error("run_simgrid: flow " + std::to_string(f.id) +
                               " is not a burst flow (it has predecessors, latency or no links)");
    else if (f.bytes.value != std::round(f.bytes.value))  // SimGrid's payload is a whole byte count
      throw std::runtime_error("run_simgrid: flow " + std::to_string(f.id) + " has a fractional size of " +
                               std::to_string(f.bytes.value) + " bytes");
  if (flows.empty()) return {};
  int fd[2];
  if (pipe(fd) != 0) throw std::runtime_error("run_simgrid: pipe failed");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("run_simgrid: fork failed");
  if (pid == 0) {
    close(fd[0]);
    std::vector<double> out;
    int code = 0;
    try {
      simulate_in_child(network, flows, out);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "simgrid child: %s\n", e.what());
      code = 1;
    }
    const char* p = reinterpret_cast<const char*>(out.data());
    std::size_t left = out.size() * sizeof(double);
    while (code == 0 && left > 0) {
      const ssize_t w = write(fd[1], p, left);
      if (w <= 0) code = 1;
      else p += w, left -= static_cast<std::size_t>(w);
    }
    close(fd[1]);
    _exit(code);
  }
  close(fd[1]);
  std::vector<double> in(flows.size() + 2);
  char* p = reinterpret_cast<char*>(in.data());
  std::size_t left = in.size() * sizeof(double);
  while (left > 0) {
    const ssize_t r = read(fd[0], p, left);
    if (r <= 0) break;
    p += r, left -= static_cast<std::size_t>(r);
  }
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (left != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("run_simgrid: the SimGrid child failed (status " + std::to_string(status) + ")");
  SimgridRun run;
  run.setup_s = in.back();
  in.pop_back();
  run.wall_s = in.back();
  in.pop_back();
  run.finish = std::move(in);
  return run;
}

}  // namespace reshard::simgrid_check
