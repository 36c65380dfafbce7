// The `reshard` command: one subcommand per stage of DESIGN.md §2. Library errors become one
// message on stderr and exit code 2; usage errors are reported by CLI11 with exit code 106/109.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "commands.hpp"
#include "reshard/model/errors.hpp"

int main(int argc, char** argv) {
  CLI::App app{"reshard: model, simulate and execute weight resharding between parallel layouts"};
  app.set_version_flag("--version", "reshard 0.1.0");
  app.require_subcommand(1);
  reshard::cli::add_backends_command(app);
  reshard::cli::add_topo_command(app);
  reshard::cli::add_model_command(app);
  reshard::cli::add_plan_command(app);
  reshard::cli::add_compare_command(app);
  reshard::cli::add_calibrate_command(app);
  reshard::cli::add_simulate_command(app);
  reshard::cli::add_exec_command(app);
  reshard::cli::add_check_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const reshard::model::Error& e) {
    std::cerr << "reshard: error: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "reshard: internal error: " << e.what() << '\n';
    return 3;
  }
  return 0;
}
