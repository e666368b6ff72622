// tessel: decompose tensor computations across devices, simulate, run, compare.
#include <exception>
#include <iostream>
#include <new>

#include <CLI/CLI.hpp>

#include "core/error.h"
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
  auto code = [](ExitCode c) { return static_cast<int>(c); };
  try {
    app.parse(argc, argv);
  } catch (const CLI::Error& e) {
    // --help and --version arrive as errors with exit code 0: CLI11 prints them.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "tessel: error: " << e.what() << "\n(run `tessel --help` or `tessel COMMAND --help` for usage)\n";
    return code(ExitCode::usage);
  } catch (const tessel::ResourceError& e) {
    std::cerr << "tessel: error: " << e.what() << '\n';
    return code(ExitCode::resource);
  } catch (const tessel::Error& e) {
    std::cerr << "tessel: error: " << e.what() << '\n';
    return code(ExitCode::user_error);
  } catch (const std::bad_alloc&) {
    std::cerr << "tessel: error: out of memory (a request too large for this machine: fewer devices, a smaller "
                 "workload or a machine with more memory)\n";
    return code(ExitCode::resource);
  } catch (const std::exception& e) {
    std::cerr << "tessel: internal error: " << e.what() << '\n';
    return code(ExitCode::internal);
  }
  return code(ExitCode::ok);
}
