#pragma once
// The compare experiment: plan, simulate and run the same task graphs on a backend
// (CPU threads, or CUDA GPUs), round by round, and lay simulated and measured times side by side.
//
// run_compare() does the measuring (calibration and kernel profile per round unless a
// machine is given, each timed run after `warmup` untimed ones, every result checked
// against the reference evaluator) and simulates each round with that round's figures;
// summarise() turns the per-round figures into the rows, MAPE, Kendall's tau, the
// ranking check and each row's spread of measured rounds. summarise() is pure and
// testable without running anything; the `tessel compare` command only parses options
// and prints (compare_to_json, print_compare).

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/graph.h"
#include "core/machine.h"
#include "core/stats.h"
#include "experiments/cli.h"
#include "experiments/backend.h"
#include "experiments/offload_order.h"
#include "runtime/cpu_executor.h"
#include "sim/simulator.h"

namespace tessel::experiments {

// Which of a compute task's profiled times (runtime::TaskProfile) the simulation gives it:
//   cold    its cold time (the call right after its worker wrote twice its per-core cache
//           of other memory): the default, since inside a task graph the CPU's kernels run
//           near it even where their data is cached (README, "simulated against measured")
//   cached  between hot and cold by how much of its data the simulated worker's cache
//           (an LRU of --cache-bytes) still holds
//   hot     its hot time (its kernel called again and again)
//   retained  between its cold time and its time from DRAM (the call after its operands
//           were flushed from every cache level) by how much of a buffer the host's
//           last-level cache kept in that round's calibration (its retention probe, r):
//           r·cold + (1 − r)·dram. On a host whose other tenants take the last-level cache
//           a graph's data is partly read from DRAM, which the cold call does not see.
//           Copies (loads, moves, touches) keep the rates calibrated through that cache:
//           weighing them too over-predicted the capped LLaMA block's loads 1.6-2.3x.
//           Needs compare's own calibration (not with -m). The default: where the probe
//           reads near 1 it is the cold time, and where other tenants take the cache it
//           followed the measured runs more closely (README, memory-bounded execution)
enum class KernelTimes { cold, cached, hot, retained };
[[nodiscard]] KernelTimes parse_kernel_times(std::string_view s, std::string_view what);
[[nodiscard]] std::string_view to_string(KernelTimes k);
// KernelTimes::retained's time of one task: retained_fraction (clamped to [0, 1]) of the
// way from dram_s back to cold_s; a task without a DRAM time (dram_s < 0) keeps cold_s.
[[nodiscard]] double retained_kernel_seconds(double cold_s, double dram_s, double retained_fraction);

struct CompareOptions {
  int devices = 2;
  std::string backend = "cpu";  // cpu, cuda or mpi (under mpirun; needs `machine`, analytic compute model)
  cli::CudaCliOptions cuda;     // --backend cuda: GPUs, moves, stream priority, tf32
  std::vector<std::string> strategies{"eindecomp", "data-parallel", "megatron"};
  std::vector<std::string> policies{"async", "bsp"};
  // False: `policies` is the default list, which a memory cap narrows to async (bsp cannot
  // run a capped graph) with a note on the log; true: as given (bsp with a cap: an error).
  bool policies_given = true;
  std::optional<Machine> machine;  // none: calibrate here, one round before each timed round
  std::string machine_name;        // for reports: the file it came from
  std::string network = "flow";
  std::string weights = "resident";  // planner::Weights: resident or fetched
  int repeat = 5;
  int warmup = 1;
  double calibration_seconds = 0.05;
  bool profiled = true;  // kernels profiled here; false: the analytic roofline only
  double profile_seconds = 0.002;
  // --kernel-times, with profiled on the CPU: which profiled time a compute task takes in
  // the simulation (KernelTimes; GPU kernels are timed hot only). Retained by default
  // (since 2026-12-07; cold before); where there is no retention probe (a given machine)
  // the default falls back to cold, and a retained that was asked for is an error.
  KernelTimes kernel_times = KernelTimes::retained;
  bool kernel_times_given = false;  // --kernel-times was on the command line
  // --cache-bytes (KernelTimes::cached): the bytes the cache model holds per worker
  // (SimOptions::cache_capacity_bytes); 0: the machine's cache_capacity_bytes (this CPU's
  // per-core cache).
  std::int64_t cache_bytes = 0;
  std::uint64_t seed = 1;    // the random inputs, and -s search's
  cli::SearchOptions search;  // -s search (on `machine`, which it needs); its seed is `seed`
  std::string trace_dir;  // non-empty: write every simulated and measured timeline here
  // --comm-priority, --comm-sms, --comm-mechanism: set on every machine simulated.
  InterferenceSettings interference;
  sim::Priority ready_order = sim::Priority::longest_path;  // --ready-order
  // --interference-beside: each round also simulated with the machine's interference rows
  // replaced, against the same measured runs: "published" (the published defaults, the
  // run's priority, SMs and mechanism kept) or "none" (no slowdown while compute and
  // communication overlap); empty: not. What measured rows gain over either shows in one
  // run, not two runs of their own rounds.
  std::string interference_beside;
  // --memory-cap (experiments/memory_cap.h): every strategy's task graph planned under it
  // (async policy only); empty: uncapped.
  std::string memory_cap;
  // --offload-order: with fixed, every capped graph runs and is simulated in the fixed
  // order (fixed_order(), the ZeRO-Offload-style baseline); fixed needs a memory cap.
  cli::OffloadOrder offload_order = cli::OffloadOrder::free;
  // --copy-lane (experiments/memory_cap.h): run by the CPU executor and simulated alike
  // (host_copy_lane on the machine's single-lane device types: a calibrated machine; a
  // preset's types are not single-lane, and a warning says the choice changes nothing
  // in its simulation). With fewer than 2 x devices cores the copy lanes share the
  // workers' cores, which the simulation does not model (copy_lane_cores_shared).
  runtime::CopyLane copy_lane = runtime::CopyLane::worker;
};

// One strategy × policy: its figures in every round (the same length each).
struct CompareRounds {
  std::string strategy;
  std::string policy;
  std::int64_t tasks = 0;
  std::vector<double> simulated_s;
  std::vector<double> measured_s;
  std::vector<double> analytic_s;  // with profiled: the analytic simulation of the same round
  std::vector<double> hot_s;       // with the cache model: hot kernel times only
  std::vector<double> cold_s;      // with retained kernel times: cold kernel times only
  std::vector<double> beside_s;    // --interference-beside: the same simulation with the other interference
  std::vector<double> unmarked_s;     // --backend cuda, --launch graph: each timed run without per-task marks
  bool correct = true;
  double max_normwise_error = 0;
};

struct CompareRow {
  CompareRounds rounds;
  double simulated_s = 0;  // medians over the rounds
  double measured_s = 0;
  std::optional<double> measured_unmarked_s;  // median of rounds.unmarked_s, where measured
  std::vector<double> errors_pct;  // per round, (simulated − measured) / measured
  double error_pct = 0;            // their median
  // Where that median lies, distribution-free (stats::median_interval, 95% where the
  // rounds allow it: 6 rounds or more): the rounds' errors at two ranks.
  stats::MedianInterval error_interval_pct;
  std::optional<double> simulated_analytic_s, error_analytic_pct;
  std::optional<double> simulated_hot_s, error_hot_pct;
  std::optional<double> simulated_cold_s, error_cold_pct;
  std::optional<double> simulated_interference_beside_s, error_interference_beside_pct;
  stats::Spread measured_spread_s;  // p10 and p90 of the measured rounds
  double measured_spread_pct = 0;   // (p90 − p10) / median measured
  // The machine's own drift between rounds is wider than the model's error: the error
  // says little about the model.
  bool spread_exceeds_error = false;
};

struct TaskKindError {
  std::int64_t count = 0;
  double simulated_s = 0;
  double measured_s = 0;
  double abs_error_s = 0;
};

struct CompareResult {
  std::string graph;
  int devices = 0;
  std::string backend = "cpu";
  std::string machine;  // "calibrated now" or the given name
  std::string weights;  // resident or fetched
  nlohmann::json calibration;  // null unless calibrated here
  std::string network;
  int repeat = 0, warmup = 0;
  bool profiled = true;
  KernelTimes kernel_times = KernelTimes::cold;  // what the profiled simulation used (hot on a GPU)
  std::int64_t cache_model_bytes = 0;  // the per-worker capacity the cache model used (0: off)
  std::string launch = "graph";  // --backend cuda: how the runs reached the GPU (--launch)
  std::size_t kernels_profiled = 0;  // --backend cuda: distinct kernels timed on the GPU per round
  std::size_t tasks_profiled = 0;    // cpu: compute tasks timed in place per round, over every row
  std::vector<CompareRow> rows;
  double mape_pct = 0, mape_analytic_pct = 0, mape_hot_pct = 0;
  std::optional<double> mape_cold_pct;  // with retained kernel times
  std::string interference_beside;             // CompareOptions::interference_beside
  std::optional<double> mape_interference_beside_pct;  // with it
  // With retained kernel times: each round's r, the calibration's retention probe.
  std::vector<double> retained_fractions;
  double kendall_tau = 0;
  std::map<std::string, double> kendall_tau_by_policy;
  std::vector<stats::PairOrder> pairs;  // row indices, same policy
  std::map<std::string, TaskKindError> task_kinds;  // the median round's spans, by task kind
  bool correct = true;
  std::string trace_dir;
  // With a memory cap: per row, the plan's figures and the peak memory simulated and
  // measured (median round); null without one.
  nlohmann::json memory_cap;
  runtime::CopyLane copy_lane = runtime::CopyLane::worker;  // meaningful with the cpu backend only
  // The overlap settings the simulation ran with (--ready-order, and the machine's
  // interference after --comm-priority, --comm-sms, --comm-mechanism), in simulate's JSON
  // names and spellings.
  std::string ready_order = "longest-path";
  std::string comm_priority = "normal";
  int comm_sms = 0;
  std::string comm_mechanism = "sm-kernels";
  // The copy lanes (thread) time-share the workers' cores (fewer than 2 x devices): the
  // simulation still gives each its own core.
  bool copy_lane_cores_shared = false;
};

// Runs the experiment on `g`. Errors (unknown strategy or policy, a machine of another
// device count) are raised before any measuring starts. Progress goes to `log`.
[[nodiscard]] CompareResult run_compare(const Graph& g, const std::string& graph_name, const CompareOptions& options,
                                        std::FILE* log = stderr);

// The rows and summary figures from per-round figures (rows keep their order; pairs are
// judged within a policy). Leaves task_kinds, calibration and the run's settings alone.
void summarise(CompareResult& result, const std::vector<CompareRounds>& rounds);

[[nodiscard]] nlohmann::json to_json(const CompareRow& row);
[[nodiscard]] nlohmann::json compare_to_json(const CompareResult& result);
void print_compare(const CompareResult& result, std::FILE* out = stdout);

}  // namespace tessel::experiments
