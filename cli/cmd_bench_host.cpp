// mpirun -np N reshard bench-host [-o host.yaml] [--json]: the host backend's micro-benchmark
// (exec/host_bench.hpp). Process 0 prints the constants and writes the profile that `reshard check
// MEASUREMENT --params host.yaml` predicts host-backend runs with (model/host_cost.hpp).
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "reshard/exec/host_bench.hpp"
#include "table.hpp"

namespace reshard::cli {

using namespace reshard::model;

void add_bench_host_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench-host", "Measure the host backend's cost profile on this machine (under mpirun -np N, N >= 2): copy rates, "
                    "message latency, MPI transport rate, barrier, cores");
  auto out = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto seconds = std::make_shared<double>(0.2);
  auto passes = std::make_shared<int>(1);
  cmd->add_option("-o,--output", *out, "Write the host profile here (YAML, read by check --params)");
  cmd->add_option("--seconds", *seconds, "Longest time of a process's timed loop (default 0.2)")->check(CLI::PositiveNumber);
  cmd->add_option("--passes", *passes, "Run every test this many times; each constant is the median (default 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", *json, "Print one JSON object (process 0)");
  cmd->callback([out, json, seconds, passes] {
    exec::HostBenchOptions o;
    o.seconds_per_test = *seconds;
    o.passes = *passes;
    const auto p = exec::bench_host(o);
    if (!p) return;  // not process 0
    if (!out->empty()) p->save(*out);
    if (*json) {
      nlohmann::json j{{"schema", "reshard-bench-host-1"},
                       {"profile", p->profile},
                       {"machine", p->machine},
                       {"cores", p->cores},
                       {"processes", p->processes},
                       {"copy_rate_Bps", p->copy_rate.value},
                       {"copy_rate_all_Bps", p->copy_rate_all.value},
                       {"touch_rate_all_Bps", p->touch_rate_all.value},
                       {"transport_rate_Bps", p->transport_rate.value},
                       {"transport_rate_all_Bps", p->transport_rate_all.value},
                       {"connect_time_s", p->connect_time.value},
                       {"message_time_s", p->message_time.value},
                       {"message_latency_s", p->message_latency.value},
                       {"barrier_s", p->barrier.value}};
      if (!out->empty()) j["profile_file"] = *out;
      std::cout << j.dump(2) << '\n';
      return;
    }
    print_fields(std::cout, {{"machine", p->machine},
                             {"processes", std::to_string(p->processes) + " on " + std::to_string(p->cores) +
                                               (p->cores == 1 ? " core" : " cores")},
                             {"copy rate, one process", format(p->copy_rate)},
                             {"copy rate, all processes", format(p->copy_rate_all)},
                             {"fresh memory, all processes", format(p->touch_rate_all)},
                             {"MPI transport rate, one pair", format(p->transport_rate)},
                             {"MPI transport rate, all processes", format(p->transport_rate_all)},
                             {"first message of a pair", format(p->connect_time)},
                             {"small message, all processes", format(p->message_time)},
                             {"message latency", format(p->message_latency)},
                             {"barrier", format(p->barrier)}});
    if (!out->empty()) std::cout << "profile written to " << *out << '\n';
  });
}

}  // namespace reshard::cli
