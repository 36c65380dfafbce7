// One function per subcommand; each adds itself to the app. main.cpp calls them all.
#pragma once

#include <CLI/CLI.hpp>

namespace reshard::cli {

void add_init_command(CLI::App& app);
void add_backends_command(CLI::App& app);
void add_systems_command(CLI::App& app);
void add_topo_command(CLI::App& app);
void add_model_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_exec_command(CLI::App& app);
void add_check_command(CLI::App& app);
void add_bench_host_command(CLI::App& app);

// An error every process of an mpirun job meets alike (bad input, read before MPI starts): process
// 0 prints it, the others leave with the same exit code without printing it again, a second later
// (the launcher ends the whole job at the first process that fails, process 0 with it, perhaps
// before it has printed).
struct ReportedByFirstProcess {
  int exit_code;
};

}  // namespace reshard::cli
