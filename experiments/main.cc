// tessel: decompose tensor computations across devices, simulate, run, compare.
#include <iostream>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "experiments/cli.h"

int main(int argc, char** argv) {
  CLI::App app{
      "tessel: decompose tensor computations (extended einsums) across many devices, score the\n"
      "decomposition in a simulator and run the same task graph for real.\n\n"
      "Start with `tessel workloads`, then `tessel run -w chain -d 4`."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessel 0.1.0");
  tessel::cli::add_core_commands(app);
  tessel::cli::add_plan_commands(app);
  tessel::cli::add_sim_commands(app);
  tessel::cli::add_compare_commands(app);
  tessel::cli::add_sweep_commands(app);
  tessel::cli::add_export_commands(app);
  tessel::cli::add_reproduce_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tessel::Error& e) {
    std::cerr << "tessel: error: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tessel: internal error: " << e.what() << '\n';
    return 3;
  }
  return 0;
}
