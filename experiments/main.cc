// tessel: decompose tensor computations across devices, simulate, run, compare.
#include <exception>
#include <iostream>
#include <new>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "experiments/backend.h"
#include "experiments/cli.h"

int main(int argc, char** argv) {
  using tessel::cli::ExitCode;
  CLI::App app{
      "tessel: decompose tensor computations (extended einsums) across many devices, score the\n"
      "decomposition in a simulator and run the same task graph for real.\n\n"
      "Start with `tessel workloads`, then `tessel run -w chain -d 4`.\n\n"
      "Exit codes: 0 success, 1 error in the input (tessel: error: ...), 2 error in the command\n"
      "line, 3 out of memory or threads, 4 internal error (a bug: please report it)."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessel 0.1.0");
  tessel::cli::add_core_commands(app);
  tessel::cli::add_plan_commands(app);
  tessel::cli::add_sim_commands(app);
  tessel::cli::add_compare_commands(app);
  tessel::cli::add_sweep_commands(app);
  tessel::cli::add_export_commands(app);
  tessel::cli::add_reproduce_commands(app);
  auto code = [](ExitCode c) { return static_cast<int>(c); };
  try {
    app.parse(argc, argv);
  } catch (const CLI::Error& e) {
    // --help and --version arrive as errors with exit code 0: CLI11 prints them.
    if (e.get_exit_code() == 0) return app.exit(e);
    return tessel::cli::error_exit(code(ExitCode::usage),
                                   std::string("tessel: error: ") + e.what() +
                                       "\n(run `tessel --help` or `tessel COMMAND --help` for usage)",
                                   &e);
  } catch (const tessel::ResourceError& e) {
    return tessel::cli::error_exit(code(ExitCode::resource), std::string("tessel: error: ") + e.what(), &e);
  } catch (const tessel::Error& e) {
    return tessel::cli::error_exit(code(ExitCode::user_error), std::string("tessel: error: ") + e.what(), &e);
  } catch (const std::bad_alloc& e) {
    return tessel::cli::error_exit(code(ExitCode::resource),
                                   "tessel: error: out of memory (a request too large for this machine: fewer devices, "
                                   "a smaller workload or a machine with more memory)",
                                   &e);
  } catch (const std::exception& e) {
    return tessel::cli::error_exit(code(ExitCode::internal), std::string("tessel: internal error: ") + e.what(), &e);
  }
  return code(ExitCode::ok);
}
