// The `reshard` command: one subcommand per stage of docs/design.md §2. Library errors become one
// message on stderr and exit code 2; usage errors are reported by CLI11 with exit code 106/109.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "commands.hpp"
#include "reshard/model/errors.hpp"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace {

// The simulator allocates and frees arrays of gigabytes phase after phase (flows, dependency
// graph, refinement, engine). glibc maps every block above 32 MB afresh from the kernel and unmaps
// it when freed, and the kernel zeroes each page at its first touch: on the tuned kimi-k3 run that
// is millions of page faults and seconds of zeroing. Served from the heap and kept there when
// freed, the blocks are reused instead, with fewer faults and a lower peak.
void keep_freed_memory_for_reuse() {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // never give the heap's top back
#endif
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory_for_reuse();
  CLI::App app{"reshard: model, simulate and execute weight resharding between parallel layouts"};
  app.set_version_flag("--version", "reshard 0.1.0");
  app.require_subcommand(1);
  reshard::cli::add_init_command(app);
  reshard::cli::add_backends_command(app);
  reshard::cli::add_systems_command(app);
  reshard::cli::add_topo_command(app);
  reshard::cli::add_model_command(app);
  reshard::cli::add_plan_command(app);
  reshard::cli::add_compare_command(app);
  reshard::cli::add_sweep_command(app);
  reshard::cli::add_calibrate_command(app);
  reshard::cli::add_simulate_command(app);
  reshard::cli::add_exec_command(app);
  reshard::cli::add_check_command(app);
  reshard::cli::add_bench_host_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const reshard::cli::ReportedByFirstProcess& e) {
    return e.exit_code;
  } catch (const reshard::model::Error& e) {
    std::cerr << "reshard: error: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "reshard: internal error: " << e.what() << '\n';
    return 3;
  }
  return 0;
}
