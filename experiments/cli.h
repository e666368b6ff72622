#pragma once
// Shared pieces of the `tessel` command line: how a command names its graph and its
// decomposition, JSON / text output, and the registry of subcommands.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/graph.h"
#include "core/machine.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "core/tensor.h"

namespace tessel::cli {

// The CLI's exit codes (README, "Exit codes"). Every error prints one line on stderr:
// `tessel: error: ...` (codes 1-3) or `tessel: internal error: ...` (4).
enum class ExitCode : int {
  ok = 0,
  user_error = 1,  // a tessel::Error: bad input, impossible request, failed check
  usage = 2,       // the command line itself: unknown option, missing or malformed value
  resource = 3,    // out of memory or threads (tessel::ResourceError, std::bad_alloc)
  internal = 4,    // any other exception: a bug
};

// The most timed runs (--repeat) or untimed warm-up runs (--warmup) one command takes:
// every timed run keeps its timeline until the median is known.
inline constexpr int kMaxRepeat = 10000;

// A device count on the command line: 1 ..kMaxDevices (core/types.h), checked while the
// command line is parsed, before any work.
[[nodiscard]] CLI::Validator device_count();
// A number > 0 (>= 0): "--rounds: 0 is not a positive number".
[[nodiscard]] CLI::Validator positive_number();
[[nodiscard]] CLI::Validator non_negative_number();

// -w WORKLOAD[:k=v,...] | -g GRAPH.json
struct GraphOptions {
  std::string workload;
  std::string graph_file;
  void add(CLI::App& app, const std::string& default_workload = {});
  [[nodiscard]] Graph load() const;
  [[nodiscard]] std::string describe() const;
};

// What `-s search` reads beside -s: --budget-s SECONDS, --seed N (planner/search.h).
struct SearchOptions {
  double budget_s = 0;  // 0: not given (30 s, or none with budget_simulations)
  std::uint64_t seed = 1;
  std::int64_t budget_simulations = 0;  // --budget-simulations N (0: none)
  // with_seed false: the command has its own --seed (compare's inputs) and passes it on.
  void add(CLI::App& app, bool with_seed = true);
  // The wall-clock budget in force: --budget-s as given; without it 30 s, or none (1e6 s)
  // when a simulation count bounds the search.
  [[nodiscard]] double effective_budget_s() const {
    return budget_s > 0 ? budget_s : (budget_simulations > 0 ? 1e6 : 30.0);
  }
};

// -d N, -s STRATEGY | --parts SPEC | --decomposition FILE, --weights resident|fetched,
// and SearchOptions
struct DecompositionOptions {
  int devices = 4;
  std::string strategy;
  std::string parts;
  std::string decomposition_file;
  std::string weights = "resident";  // for -s (planner::Weights)
  std::string collectives = "moves";  // --collectives: moves or nodes (LowerOptions::collectives)
  SearchOptions search;
  void add(CLI::App& app, bool with_devices = true);
  [[nodiscard]] LowerOptions lower_options() const { return LowerOptions{collectives == "nodes"}; }
  // Without -s, --parts or --decomposition: every node split into `devices` blocks
  // along its largest indices (split_largest). `machine`, when known, is the strategy's
  // (dp-tp's nodes, the resident weights' memory check, eindecomp's link weights,
  // search's simulations).
  [[nodiscard]] Decomposition load(const Graph& g, const Machine* machine = nullptr) const;
  // What --weights applied to: "resident" or "fetched" under -s, "as given" otherwise.
  [[nodiscard]] std::string weights_used() const;
};

// --weights: the help text every command shows.
inline constexpr const char* kWeightsHelp =
    "with -s: resident (each weight block, and each fill, present at time zero on every device that reads it: "
    "replicated or sharded at rest, no move) or fetched (one copy each, moved to its readers every step)";

// --parts: "4" splits every node into 4 blocks (largest index first);
// "XY=2x2x1,XYZ=4x1x1" gives node XY parts 2x2x1 ...; both may be combined.
[[nodiscard]] Decomposition decomposition_from_parts_spec(const Graph& g, int devices, const std::string& spec);

// --bytes: "1GiB", "256MiB", "64MB", "1e9", "4096"; K/M/G/T alone are binary as in
// nccl-tests. Error naming the text unless it is a whole number of bytes >= 1.
[[nodiscard]] std::int64_t parse_bytes(const std::string& text);

// Human-readable figures for text output: "1.50 MiB", "12.3 Gflop/s", "4.2 ms".
[[nodiscard]] std::string human_bytes(double bytes);
[[nodiscard]] std::string human_count(double value, const char* unit);
[[nodiscard]] std::string human_seconds(double seconds);
// "72 (input 12, compute 8, touch 32, move 16, output 4)"
[[nodiscard]] std::string task_counts(const TaskGraph& tg);

// The decomposition a named planner strategy gives `g` on `devices` devices, with
// weights "resident" or "fetched" (planner::Weights), on `machine` when given. Warns on
// stderr when a device gets no compute.
[[nodiscard]] Decomposition decompose(const Graph& g, const std::string& strategy, int devices,
                                      const std::string& weights = "resident", const Machine* machine = nullptr,
                                      const SearchOptions& search = {});

// The progress sink `search` prints to: one line overwritten in place on a terminal,
// plain lines otherwise (stderr).
void print_search_progress(const std::string& line);

// Checks every output against the reference, normwise (max |error| / max(1, max
// |reference|) <= runtime::output_tolerance(dtype, backend): 1e-4 for f32, 1e-9 for f64,
// f16/bf16 1e-2/3e-2 on the CUDA backend, which stores them); one JSON object per output,
// *ok false when any fails.
[[nodiscard]] nlohmann::json check_outputs(const Graph& g, const std::map<std::string, Tensor>& got,
                                           const std::map<std::string, Tensor>& want, bool* ok,
                                           std::string_view backend = "cpu");

// Warns on stderr when a plan leaves devices without compute (planner::Plan::idle_devices).
void warn_idle(const std::vector<int>& idle, int devices, const std::string& strategy);
// "0, 2-5, 7"
[[nodiscard]] std::string device_ranges(const std::vector<int>& devices);

// Warns on stderr when more CPU workers than cores are asked for.
void warn_oversubscribed(int devices);

// Prints JSON (pretty) to stdout.
void print_json(const nlohmann::json& j);

// Each commands_*.cc file adds its subcommands; main() calls them in order.
void add_core_commands(CLI::App& app);  // workloads, lower, einsum, run   (commands_core.cc)
void add_plan_commands(CLI::App& app);  // plan                            (commands_plan.cc)
void add_sim_commands(CLI::App& app);   // simulate                        (commands_sim.cc)
void add_compare_commands(CLI::App& app);  // calibrate, compare            (commands_compare.cc)
void add_sweep_commands(CLI::App& app);    // sweep                           (commands_sweep.cc)
void add_export_commands(CLI::App& app);   // export                          (commands_export.cc)
void add_reproduce_commands(CLI::App& app);  // reproduce                     (commands_reproduce.cc)

}  // namespace tessel::cli
