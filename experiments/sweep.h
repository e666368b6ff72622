#pragma once
// `tessel sweep`: the cartesian product of a spec's lists, each point planned, lowered
// and simulated (or run on the CPU backend), one CSV row per point appended as it
// finishes. A results file is resumable: points already in it are skipped.
//
// Spec (JSON object, every key a non-empty list; a key left out takes the CLI's
// default):
//   workloads   workload strings as -w takes them (required)
//   devices     device counts                         (default [4], as -d)
//   strategies  planner strategies                    (default ["split-largest"], as no -s)
//   placements  placements                            (default ["round-robin"])
//   machines    presets or machine JSON files (required: `simulate -m` has no default)
//   networks    flow | alpha-beta                     (default ["flow"], as simulate)
//   policies    async | bsp                           (default ["async"])
//   backends    sim | cpu                             (default ["sim"]; cpu: measured on
//               this machine's cores, median of 3 runs after one warm-up, run one point
//               at a time whatever --jobs says)
//   weights     resident | fetched                    (default ["resident"], as --weights)
//   memory_caps caps as --memory-cap takes them ("0.5", "50%", "512MiB"), or null for
//               uncapped                              (default [null]). A capped point is
//               planned as simulate plans it (cli::simulate_capped: each prefetch rule,
//               the fastest kept); a cpu one as run plans it (cli::cap_memory, one-range,
//               bounded by this machine's RAM) and runs on the workers (copy lane worker).
//               A cap the parser refuses is an Error naming the key and the value.
//   offload_orders free | fixed                       (default ["free"], as --offload-order)
//               fixed applies to capped points only: an uncapped point runs as planned
//               (free), so the pair (null, fixed) is not a point, and "fixed" with every
//               cap null is an Error naming both keys.
// Points are enumerated in that key order, the last key varying fastest.

#include <atomic>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/simulator.h"

namespace tessel::experiments {

struct SweepSpec {
  std::vector<std::string> workloads;
  std::vector<int> devices{4};
  std::vector<std::string> strategies{"split-largest"};
  std::vector<std::string> placements{"round-robin"};
  std::vector<std::string> machines;
  std::vector<std::string> networks{sim::SimOptions{}.network};
  std::vector<std::string> policies{"async"};
  std::vector<std::string> backends{"sim"};
  std::vector<std::string> weights{"resident"};
  std::vector<std::string> memory_caps{""};  // as given; "": uncapped (null in the spec)
  std::vector<std::string> offload_orders{"free"};
  // Not spec keys: set from the command line for every simulated point (--comm-priority,
  // --comm-sms, --comm-mechanism, --ready-order, --fuse-collectives). They are key
  // columns of the CSV, so a file is resumed only with the options that began it.
  InterferenceSettings interference;
  sim::Priority ready_order = sim::Priority::longest_path;
  bool fuse_collectives = false;
};

// One point of the product, its key columns as text.
struct SweepPoint {
  std::string workload;
  int devices = 0;
  std::string strategy, placement, machine, network, policy, backend;
  std::string weights = "resident";
  std::string memory_cap;  // as given; empty: uncapped
  std::string offload_order = "free";
  // The command line's settings (key columns too).
  InterferenceSettings interference;
  sim::Priority ready_order = sim::Priority::longest_path;
  bool fuse_collectives = false;
  [[nodiscard]] std::vector<std::string> key() const;
};

// The key names, in column order.
[[nodiscard]] const std::vector<std::string>& sweep_keys();
// Every column of the results CSV: the keys, then the figures and `error`.
[[nodiscard]] const std::vector<std::string>& sweep_columns();

// Parses and checks a spec: an unknown key, a value of the wrong type, an empty list,
// an unknown workload, strategy, placement, machine preset, network, policy, backend or
// offload order, a memory cap parse_memory_cap() refuses, or "fixed" without a cap is an
// Error naming it (and, for names, listing the valid ones). `what` names the source in
// messages.
[[nodiscard]] SweepSpec parse_sweep_spec(const nlohmann::json& j, const std::string& what);
[[nodiscard]] std::vector<SweepPoint> sweep_points(const SweepSpec& spec);

// The figures of one point; `error` non-empty when the point failed (then the figures
// are left empty in the CSV).
struct SweepOutcome {
  double makespan_s = 0;
  std::int64_t bytes_moved = 0;
  std::int64_t peak_memory_bytes = 0;
  double compute_utilization = 0;  // mean over devices of compute busy / makespan
  double comm_utilization = 0;     // mean over devices of communication busy / makespan
  std::int64_t tasks = 0;           // of the graph that ran (capped: with its evicts and loads)
  std::int64_t events = 0;          // simulator events (0 for cpu rows)
  // The memory plan of a capped point (0 and "" uncapped), named as memory_cap_json names
  // them: evicts, loads, the bytes they copy, and the prefetch rule the plan kept.
  std::int64_t evicts = 0;
  std::int64_t loads = 0;
  std::int64_t bytes_evicted = 0;
  std::int64_t bytes_loaded = 0;
  std::string prefetch;
  double plan_wall_s = 0;           // planning
  double lower_wall_s = 0;          // lowering to the task graph
  double memory_plan_wall_s = 0;    // planning under the cap, summed over the prefetch rules
  double sim_wall_s = 0;            // simulating, every rule's run included (cpu rows: the timed runs)
  int fused_kernels = 0;            // GEMMs fused by --fuse-collectives (0: ran unfused)
  std::string error;
};
[[nodiscard]] SweepOutcome run_sweep_point(const SweepPoint& p);
// Every point on `jobs` threads (cpu-backend points one at a time after the others);
// outcomes in the order of `points`.
[[nodiscard]] std::vector<SweepOutcome> run_points(const std::vector<SweepPoint>& points, int jobs);
[[nodiscard]] std::vector<std::string> csv_row(const SweepPoint& p, const SweepOutcome& o);

// CSV with RFC 4180 quoting (fields with a comma, quote or newline are quoted).
[[nodiscard]] std::string csv_line(const std::vector<std::string>& fields);
// Splits one line; an Error naming `what` on an unterminated quote.
[[nodiscard]] std::vector<std::string> parse_csv_line(const std::string& line, const std::string& what);

struct SweepOptions {
  int jobs = 1;
  bool progress_bar = false;  // a redrawn bar (terminal) rather than one line per point
  std::FILE* log = stderr;
  // Polled between points; true stops the sweep after the points under way finish.
  std::function<bool()> stop = [] { return false; };
  // Called before each point starts (tests use it to stop a sweep halfway).
  std::function<void(const SweepPoint&)> on_start;
  // Set by an MPI job (commands_mpi.cc, rank 0): runs the points still to run (in the
  // order given, pointers into sweep_points(spec)) over the ranks, calling `finished`
  // (thread-safe) for each as it completes, wherever it ran. Unset: every point here.
  using Finished = std::function<void(const SweepPoint&, const SweepOutcome&)>;
  std::function<void(const std::vector<const SweepPoint*>& todo, const Finished& finished)> distribute;
};

struct SweepSummary {
  std::size_t total = 0;    // points in the spec
  std::size_t skipped = 0;  // already in the file
  std::size_t done = 0;     // run now (failed ones included)
  std::size_t failed = 0;
  bool interrupted = false;
  double wall_s = 0;
};

// Runs every point of `spec` not yet in `csv_path`. A new or empty file gets the
// header; an existing one must have exactly sweep_columns() as its header (an Error
// otherwise, the file untouched). A last line cut short (a sweep killed mid-write) is
// dropped and its point run again. Rows are appended in completion order, each as one
// write, flushed at once.
SweepSummary run_sweep(const SweepSpec& spec, const std::string& csv_path, const SweepOptions& options);

}  // namespace tessel::experiments
