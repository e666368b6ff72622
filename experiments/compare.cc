#include "experiments/compare.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/io.h"
#include "core/task_graph.h"
#include "core/timeline.h"
#include "experiments/cli.h"
#include "experiments/memory_cap.h"
#include "runtime/calibrate.h"
#include "runtime/cpu_executor.h"
#include "sim/simulator.h"

namespace tessel::experiments {
namespace {

using nlohmann::json;

double span_of(const Timeline& tl) {
  if (tl.spans.empty()) return 0;
  double lo = tl.spans.front().start_s, hi = 0;
  for (const Span& s : tl.spans) {
    lo = std::min(lo, s.start_s);
    hi = std::max(hi, s.end_s);
  }
  return hi - lo;
}

void print_calibration(const runtime::Calibration& c, std::FILE* log) {
  std::fprintf(log, "  GEMM peak %s per worker, generic %s, memory %s/s, copies %s/s alone, %s/s each when all copy, "
               "%s per task, %s per bsp barrier\n",
               cli::human_count(c.peak_flops_per_s, "flop/s").c_str(),
               cli::human_count(c.generic_flops_per_s, "flop/s").c_str(), cli::human_bytes(c.memory_bytes_per_s).c_str(),
               cli::human_bytes(c.copy_bytes_per_s_alone).c_str(), cli::human_bytes(c.copy_bytes_per_s_shared).c_str(),
               cli::human_seconds(c.task_overhead_s).c_str(), cli::human_seconds(c.barrier_latency_s).c_str());
}

std::vector<double> errors_of(const std::vector<double>& simulated, const std::vector<double>& measured) {
  std::vector<double> out;
  for (std::size_t r = 0; r < simulated.size(); ++r) out.push_back(stats::error_pct(simulated[r], measured[r]));
  return out;
}

}  // namespace

void summarise(CompareResult& res, const std::vector<CompareRounds>& all) {
  res.rows.clear();
  std::vector<double> sims, meas;
  std::vector<std::vector<double>> meas_rounds;
  std::vector<int> group;
  std::vector<std::string> policy_order;
  std::vector<double> errs, errs_analytic, errs_hot, errs_cold, errs_beside;
  res.correct = true;
  for (const CompareRounds& rd : all) {
    CompareRow row;
    row.rounds = rd;
    row.simulated_s = stats::median(rd.simulated_s);
    row.measured_s = stats::median(rd.measured_s);
    row.errors_pct = errors_of(rd.simulated_s, rd.measured_s);
    row.error_pct = stats::median(row.errors_pct);
    row.error_interval_pct = stats::median_interval(row.errors_pct);
    if (!rd.analytic_s.empty()) {
      row.simulated_analytic_s = stats::median(rd.analytic_s);
      row.error_analytic_pct = stats::median(errors_of(rd.analytic_s, rd.measured_s));
    }
    if (!rd.hot_s.empty()) {
      row.simulated_hot_s = stats::median(rd.hot_s);
      row.error_hot_pct = stats::median(errors_of(rd.hot_s, rd.measured_s));
    }
    if (!rd.cold_s.empty()) {
      row.simulated_cold_s = stats::median(rd.cold_s);
      row.error_cold_pct = stats::median(errors_of(rd.cold_s, rd.measured_s));
      errs_cold.push_back(*row.error_cold_pct);
    }
    if (!rd.beside_s.empty()) {
      row.simulated_interference_beside_s = stats::median(rd.beside_s);
      row.error_interference_beside_pct = stats::median(errors_of(rd.beside_s, rd.measured_s));
      errs_beside.push_back(*row.error_interference_beside_pct);
    }
    if (!rd.unmarked_s.empty()) row.measured_unmarked_s = stats::median(rd.unmarked_s);
    row.measured_spread_s = stats::spread(rd.measured_s);
    row.measured_spread_pct = row.measured_s > 0 ? row.measured_spread_s.width() / row.measured_s * 100 : 0.0;
    row.spread_exceeds_error = row.measured_spread_pct > std::fabs(row.error_pct);
    res.correct = res.correct && rd.correct;
    sims.push_back(row.simulated_s);
    meas.push_back(row.measured_s);
    meas_rounds.push_back(rd.measured_s);
    auto it = std::find(policy_order.begin(), policy_order.end(), rd.policy);
    if (it == policy_order.end()) it = policy_order.insert(policy_order.end(), rd.policy);
    group.push_back(static_cast<int>(it - policy_order.begin()));
    errs.push_back(row.error_pct);
    errs_analytic.push_back(row.error_analytic_pct.value_or(row.error_pct));
    errs_hot.push_back(row.error_hot_pct.value_or(row.error_pct));
    res.rows.push_back(std::move(row));
  }
  res.mape_pct = stats::mape_pct(errs);
  res.mape_analytic_pct = stats::mape_pct(errs_analytic);
  res.mape_hot_pct = stats::mape_pct(errs_hot);
  res.mape_cold_pct.reset();
  if (!errs_cold.empty() && errs_cold.size() == errs.size()) res.mape_cold_pct = stats::mape_pct(errs_cold);
  res.mape_interference_beside_pct.reset();
  if (!errs_beside.empty() && errs_beside.size() == errs.size())
    res.mape_interference_beside_pct = stats::mape_pct(errs_beside);
  res.kendall_tau = stats::kendall_tau(sims, meas);
  res.kendall_tau_by_policy.clear();
  for (std::size_t p = 0; p < policy_order.size(); ++p) {
    std::vector<double> s, m;
    for (std::size_t i = 0; i < res.rows.size(); ++i)
      if (group[i] == static_cast<int>(p)) {
        s.push_back(sims[i]);
        m.push_back(meas[i]);
      }
    res.kendall_tau_by_policy[policy_order[p]] = stats::kendall_tau(s, m);
  }
  res.pairs = stats::pair_orders(meas_rounds, meas, sims, group);
}

KernelTimes parse_kernel_times(std::string_view s, std::string_view what) {
  if (s == "cold") return KernelTimes::cold;
  if (s == "cached") return KernelTimes::cached;
  if (s == "hot") return KernelTimes::hot;
  if (s == "retained") return KernelTimes::retained;
  fail(what, ": unknown kernel times '", s, "' (expected cold, cached, hot or retained)");
}

std::string_view to_string(KernelTimes k) {
  switch (k) {
    case KernelTimes::cold: return "cold";
    case KernelTimes::cached: return "cached";
    case KernelTimes::hot: return "hot";
    case KernelTimes::retained: return "retained";
  }
  return "?";
}

double retained_kernel_seconds(double cold_s, double dram_s, double retained_fraction) {
  if (dram_s < 0) return cold_s;
  const double r = std::clamp(retained_fraction, 0.0, 1.0);
  return r * cold_s + (1 - r) * dram_s;
}

CompareResult run_compare(const Graph& g, const std::string& graph_name, const CompareOptions& o, std::FILE* log) {
  const int devices = o.devices;
  if (o.strategies.empty()) fail("--strategy: empty list");
  if (o.policies.empty()) fail("--policy: empty list");
  cli::check_offload_order(o.offload_order, o.memory_cap);
  std::vector<runtime::Policy> policies;
  for (const auto& p : o.policies) policies.push_back(runtime::parse_policy(p));
  // The default list holds bsp, under which a capped graph cannot run: async alone (said
  // once the plans have succeeded); a bsp the user asked for stays an error.
  const bool async_only = !o.memory_cap.empty() && !o.policies_given;
  if (async_only) policies = {runtime::Policy::async};
  if (o.backend != "cpu" && o.backend != "cuda" && o.backend != "mpi")
    fail("compare: unknown backend '", o.backend, "' (expected cpu, cuda or mpi)");
  const bool cuda = o.backend == "cuda";
  // --backend mpi: every rank runs its devices; the machine comes from `calibrate
  // --backend mpi` (CPU figures and the measured links between ranks), and kernels are
  // not profiled (that would run on rank 0 alone): the analytic compute model.
  const bool mpi = o.backend == "mpi";
  if (mpi && !o.machine)
    fail("compare --backend mpi needs -m MACHINE.json, measured with `mpirun -np R tessel calibrate --backend mpi -d ",
         devices, " -o MACHINE.json` (it does not calibrate between rounds)");
  if (!cuda && !mpi) cli::warn_oversubscribed(devices);
  const runtime::CopyLane copy_lane = o.copy_lane;
  cli::check_copy_lane(copy_lane, o.backend, !o.memory_cap.empty(), o.offload_order, devices);
  if (copy_lane == runtime::CopyLane::thread && o.machine)
    for (const DeviceType& t : o.machine->device_types)
      if (!t.single_lane) {
        std::fprintf(stderr,
                     "tessel: warning: --copy-lane thread: machine '%s' (device type '%s') is not single-lane, so its "
                     "simulation already runs evicts and loads beside compute, with or without the copy lane: "
                     "--copy-lane changes the runs here, not the simulation (a calibrated machine models it)\n",
                     o.machine_name.c_str(), t.name.c_str());
        break;
      }
  cli::check_mpi_memory_cap(o.backend, !o.memory_cap.empty());
  // Validate everything a user gave before the long work starts.
  std::vector<Decomposition> decompositions;
  for (const auto& s : o.strategies)
    decompositions.push_back(cli::decompose(g, s, devices, o.weights, o.machine ? &*o.machine : nullptr,
                                            cli::SearchOptions{o.search.budget_s, o.seed, o.search.budget_simulations}));
  const bool calibrated_now = !o.machine;
  if (o.cache_bytes < 0) fail("--cache-bytes: must be >= 0, got ", o.cache_bytes);
  if (o.cache_bytes > 0) {  // before the long work: the cache model must be on to take it
    bool known = calibrated_now;
    if (o.machine)
      for (const DeviceType& t : o.machine->device_types) known = known || t.cache_capacity_bytes > 0;
    if (!o.profiled || o.kernel_times != KernelTimes::cached || o.backend != "cpu" || !known)
      fail("--cache-bytes: the cache model is off (it needs --kernel-times cached, --compute-model profiled, the "
           "cpu backend and a machine with a cache_capacity_bytes)");
  }
  if (o.machine && o.machine->num_devices() != devices)
    fail("machine '", o.machine_name, "' describes ", o.machine->num_devices(), " devices but ", devices,
         " were asked for (calibrate again with -d ", devices, ")");
  CompareResult res;
  res.graph = graph_name;
  res.devices = devices;
  res.backend = o.backend;
  res.launch = o.cuda.launch;
  res.machine = calibrated_now ? std::string("calibrated now") : o.machine_name;
  res.weights = o.weights;
  res.network = o.network;
  res.repeat = o.repeat;
  res.warmup = o.warmup;
  res.profiled = o.profiled && !mpi;
  res.trace_dir = o.trace_dir;
  res.copy_lane = copy_lane;
  res.copy_lane_cores_shared = !cuda && !mpi && cli::copy_lane_cores_shared(copy_lane, devices);

  // The runs go round by round; in each round, one calibration round (without a
  // machine), then per strategy its rows (with --backend cuda and profiled kernels, after
  // one kernel-profiling round of the strategy), each timed run right after `warmup`
  // untimed runs of the same row (on the CPU with profiled kernels, followed by its
  // in-place profile). Each round is then simulated with the machine figures and kernel
  // times measured in that round only, and its error is that simulation against that
  // round's run: a machine whose speed drifts by tens of percent within seconds — a
  // shared VM's does — drifts under both sides of every pair alike.
  struct Round {
    double measured_s = 0;
    double unmarked_s = -1;  // RunResult::unmarked_span_s
    Timeline measured;
    sim::SimResult sim;  // profiled kernels, or analytic
    runtime::TaskProfile profile;  // cpu, profiled: the run's compute tasks timed in place
  };
  struct Row {
    std::size_t strategy = 0;
    runtime::Policy policy = runtime::Policy::async;
    const TaskGraph* tg = nullptr;
    std::unique_ptr<runtime::Executor> exec;  // one per row: its workspaces stay warm across rounds
    runtime::CpuExecutor* cpu = nullptr;      // exec, when it is the CPU backend's (in-place profiles)
    std::vector<Round> rounds;
    bool ok = true;
    double worst = 0;
  };
  std::vector<TaskGraph> graphs;
  graphs.reserve(o.strategies.size());
  for (const Decomposition& d : decompositions) graphs.push_back(lower(g, d));
  std::vector<json> cap_stats(graphs.size());
  if (!o.memory_cap.empty()) {
    for (runtime::Policy p : policies) cli::check_memory_cap_policy(runtime::to_string(p));
    for (std::size_t si = 0; si < graphs.size(); ++si) {
      cli::MemoryCapped c =
          cli::cap_memory(graphs[si], o.memory_cap, o.machine ? &*o.machine : nullptr, "one-range", {}, &g);
      // The runs are on this machine whatever -m says: its RAM holds the host copies, and
      // the devices' arenas too on the cpu backend.
      cli::check_ram(c, !cuda);
      cli::apply_offload_order(c, o.offload_order);
      graphs[si] = std::move(c.graph);
      cap_stats[si] = cli::memory_cap_json(c);
    }
    if (async_only)
      std::fprintf(log, "tessel: note: --memory-cap: comparing the async policy only (evicts and loads follow memory, "
                        "not bsp's phases; --policy bsp with a cap is an error)\n");
    res.memory_cap = json::array();
  }
  std::vector<Row> plan_rows;
  for (std::size_t si = 0; si < o.strategies.size(); ++si)
    for (runtime::Policy policy : policies) {
      Row row;
      row.strategy = si;
      row.policy = policy;
      row.tg = &graphs[si];
      if (cuda) {
        row.exec = cli::make_cuda_executor(policy, o.cuda);
      } else if (mpi) {
        row.exec = cli::make_mpi_executor(policy);
      } else {
        runtime::CpuOptions cpu_options;
        cpu_options.policy = policy;
        cpu_options.copy_lane = copy_lane;
        auto cpu_exec = std::make_unique<runtime::CpuExecutor>(cpu_options);
        row.cpu = cpu_exec.get();
        row.exec = std::move(cpu_exec);
      }
      plan_rows.push_back(std::move(row));
    }
  if (mpi && !cli::reports_results(*plan_rows.front().exec)) {  // an MPI rank other than 0: its share of every run
    runtime::TensorMap inputs = runtime::random_inputs(g, o.seed);
    for (int round = 0; round < o.repeat; ++round)
      for (std::size_t si = 0; si < o.strategies.size(); ++si)
        for (Row& row : plan_rows)
          if (row.strategy == si)
            for (int run = 0; run <= o.warmup; ++run) (void)row.exec->run(g, *row.tg, inputs);
    return res;
  }
  // Only once every input has been checked (the cap too), and on the rank that reports: a
  // refused command leaves no folder, and one that fails later takes the folder (when it
  // made it) and its traces away again.
  OutputBatch traces;
  if (!o.trace_dir.empty()) traces.add_folder("--trace-dir", o.trace_dir);
  // After the executors exist: a backend that cannot start fails before the reference,
  // the longest step of a large graph's setup.
  runtime::TensorMap inputs = runtime::random_inputs(g, o.seed);
  runtime::TensorMap want = runtime::evaluate_reference(g, inputs, /*storage_rounding=*/o.backend == "cuda");
  std::unique_ptr<runtime::CpuCalibrator> calibrator;
  Machine cuda_machine;  // --backend cuda without a machine: calibrated once, before the rounds
  if (calibrated_now && cuda) {
    res.calibration = cli::calibrate_cuda_backend(devices, o.cuda.gpus, o.calibration_seconds, &cuda_machine);
    // The machine's per-task overhead is the graph launch's; runs issued to streams pay
    // the overhead measured that way.
    if (o.cuda.launch == "stream" && res.calibration.contains("task_overhead_stream_s"))
      for (DeviceType& t : cuda_machine.device_types) {
        t.launch_latency_s = res.calibration["task_overhead_stream_s"].get<double>();
        t.dispatch_interval_s = res.calibration.value("dispatch_interval_stream_s", t.dispatch_interval_s);
      }
  } else if (cuda && o.cuda.launch == "stream") {
    std::fprintf(log,
                 "tessel: warning: --launch stream with a given machine: its per-task overhead (launch_latency_s) "
                 "and dispatch interval are whatever they were calibrated as; tessel calibrate --backend cuda "
                 "writes the graph launch's (its JSON also reports task_overhead_stream_s and "
                 "dispatch_interval_stream_s)\n");
  } else if (calibrated_now) {
    std::fprintf(log, "calibrating the CPU backend with %d workers, one round before each timed round\n", devices);
    calibrator = std::make_unique<runtime::CpuCalibrator>(runtime::CalibrationOptions{devices, o.calibration_seconds, 1});
  }
  const bool profiled = o.profiled && !mpi;
  // The cache model needs a per-core cache size: a calibration here always has one; a
  // given machine may not (then the cold profile would change nothing: not taken).
  bool machine_has_cache = calibrated_now && !cuda;
  if (o.machine)
    for (const DeviceType& t : o.machine->device_types) machine_has_cache = machine_has_cache || t.cache_capacity_bytes > 0;
  // Without compare's own calibration there is no retention probe: the default falls
  // back to cold times, an explicit request is refused.
  KernelTimes times = o.kernel_times;
  if (times == KernelTimes::retained && !calibrator) {
    if (o.kernel_times_given && profiled && !cuda)
      fail("--kernel-times retained weighs each task's cold and DRAM times by the last-level cache retention that "
           "compare's own calibration measures each round: not with -m ",
           o.machine_name.empty() ? "MACHINE" : o.machine_name, " (leave -m out, or use --kernel-times cold)");
    times = KernelTimes::cold;
  }
  const bool cache_model = profiled && times == KernelTimes::cached && machine_has_cache && !cuda;
  const bool cold_times = profiled && times == KernelTimes::cold && !cuda;  // GPU kernels: hot only
  const bool retained = profiled && times == KernelTimes::retained && !cuda;
  res.kernel_times = cache_model  ? KernelTimes::cached
                     : cold_times ? KernelTimes::cold
                     : retained   ? KernelTimes::retained
                                  : KernelTimes::hot;
  res.cache_model_bytes = cache_model ? o.cache_bytes : 0;  // the machine's, when 0: filled in below
  // --backend cuda: per strategy and round, each compute task's kernel time on the GPU.
  std::vector<std::vector<runtime::KernelProfile>> cuda_profiles(o.strategies.size());
  if (profiled && cuda) {
    std::set<std::pair<std::int64_t, std::string>> distinct;  // (strategy, node) x block shape
    for (std::size_t si = 0; si < graphs.size(); ++si)
      for (const Task& t : graphs[si].tasks)
        if (t.kind == TaskKind::compute)
          distinct.emplace(static_cast<std::int64_t>(si) * g.size() + t.node.value, to_string(t.src));
    res.kernels_profiled = distinct.size();
    std::fprintf(log, "profiling %zu kernels on the GPU, each strategy's right before its runs\n", res.kernels_profiled);
  } else if (profiled) {
    for (const Row& row : plan_rows)
      for (const Task& t : row.tg->tasks) res.tasks_profiled += t.kind == TaskKind::compute ? 1 : 0;
    std::fprintf(log,
                 "profiling in place: after each timed run, its compute tasks (%zu over %zu rows) timed again on its "
                 "own buffers with %d workers\n",
                 res.tasks_profiled, plan_rows.size(), devices);
  }
  const runtime::InPlaceProfileOptions in_place{o.profile_seconds, 0, cache_model || cold_times || retained, retained};
  for (int round = 0; round < o.repeat; ++round) {
    if (calibrator) calibrator->round();
    for (std::size_t si = 0; si < o.strategies.size(); ++si) {
      if (profiled && cuda) {
        const Row* first = nullptr;  // the strategy's first row's executor profiles its kernels
        for (const Row& row : plan_rows)
          if (row.strategy == si && !first) first = &row;
        cuda_profiles[si].push_back(cli::profile_cuda_kernels(*first->exec, g, graphs[si], inputs));
      }
      for (Row& row : plan_rows) {
        if (row.strategy != si) continue;
        for (int run = 0; run <= o.warmup; ++run) {
          // The timed run's compute tasks are profiled right after it, on its buffers.
          runtime::TaskProfile profile;
          runtime::RunResult r;
          if (profiled && row.cpu && run == o.warmup) {
            runtime::ProfiledRun pr = row.cpu->run_profiled(g, *row.tg, inputs, in_place);
            r = std::move(pr.run);
            profile = std::move(pr.profile);
          } else {
            r = row.exec->run(g, *row.tg, inputs);
          }
          // Every run's result is checked, the untimed ones too: a wrong answer is
          // never hidden behind a median.
          bool ok = false;
          json check = cli::check_outputs(g, r.outputs, want, &ok, o.backend);
          row.ok = row.ok && ok;
          for (const auto& c : check) row.worst = std::max(row.worst, c["normwise_rel_error"].get<double>());
          if (run == o.warmup) {
            Round& rd = row.rounds.emplace_back();
            rd.measured_s = span_of(r.timeline);
            rd.unmarked_s = r.unmarked_span_s;
            rd.measured = std::move(r.timeline);
            rd.profile = std::move(profile);
          }
        }
      }
    }
  }
  if (calibrator) {
    runtime::Calibration c = calibrator->result();
    print_calibration(c, log);
    res.calibration = runtime::to_json(c);
    if (c.outer_cache_retained_fraction < runtime::kRetentionWarnBelow)
      std::fprintf(stderr,
                   "tessel: warning: the last-level cache kept %.0f%% of a buffer while the workers idled %.0f ms "
                   "(calibration, median of the rounds): other work on this host shares it, so buffers a run placed "
                   "milliseconds earlier are partly read from DRAM; %s\n",
                   100 * c.outer_cache_retained_fraction, 1e3 * c.outer_cache_retention_idle_s,
                   retained ? "--kernel-times retained weighs compute tasks by each round's retention (one fraction "
                              "for every buffer, whatever its age; copies keep their rates, calibrated through the cache)"
                            : "the cold kernel profile does not see that, and measured times (memory-bound tasks most: "
                              "loads, touches) are likely to run above the simulation (--kernel-times retained "
                              "weighs tasks by it)");
  }
  // The machine each round is simulated on: that round's calibration, or the given one.
  std::vector<Machine> round_machines;
  for (int r = 0; r < o.repeat; ++r) {
    round_machines.push_back(calibrator ? runtime::machine_from_calibration(calibrator->round_result(r))
                             : o.machine ? *o.machine
                                         : cuda_machine);
    o.interference.apply(round_machines.back());
    // The executor's copy lane, simulated: evicts and loads beside the worker, or on it.
    for (DeviceType& t : round_machines.back().device_types)
      if (t.single_lane) t.host_copy_lane = copy_lane == runtime::CopyLane::thread;
  }
  if (retained)
    for (int r = 0; r < o.repeat; ++r)
      res.retained_fractions.push_back(calibrator->round_result(r).outer_cache_retained_fraction);
  if (cache_model && res.cache_model_bytes == 0)
    res.cache_model_bytes = round_machines.front().device_types.front().cache_capacity_bytes;
  {  // every round's machine has the same interference settings: the options', or the machine's own
    const Interference& im = round_machines.front().interference;
    res.ready_order = std::string(sim::to_string(o.ready_order));
    res.comm_priority = std::string(to_string(im.comm_priority));
    res.comm_sms = im.comm_sms;
    res.comm_mechanism = std::string(to_string(im.comm_mechanism));
  }
  res.interference_beside = o.interference_beside;
  // --interference-beside: every round's machine with the other interference rows.
  auto other_interference = [&](const Machine& m) {
    Machine alt = m;
    const Interference& mine = m.interference;
    if (o.interference_beside == "none") {
      alt.interference = Interference::none();
    } else {
      alt.interference = Interference{};  // the published defaults
    }
    alt.interference.comm_priority = mine.comm_priority;
    alt.interference.comm_sms = mine.comm_sms;
    alt.interference.comm_mechanism = mine.comm_mechanism;
    alt.interference.fused = mine.fused;
    return alt;
  };
  std::vector<CompareRounds> all;
  for (Row& row : plan_rows) {
    const TaskGraph& tg = *row.tg;
    sim::SimOptions so;
    so.network = o.network;
    so.policy = row.policy == runtime::Policy::async ? sim::Policy::async : sim::Policy::bsp;
    so.priority = o.ready_order;
    so.cache_capacity_bytes = o.cache_bytes;
    CompareRounds cr;
    cr.strategy = o.strategies[row.strategy];
    cr.policy = std::string(runtime::to_string(row.policy));
    cr.tasks = tg.size();
    cr.correct = row.ok;
    cr.max_normwise_error = row.worst;
    for (int r = 0; r < static_cast<int>(row.rounds.size()); ++r) {
      Round& rd = row.rounds[static_cast<std::size_t>(r)];
      const Machine& round_machine = round_machines[static_cast<std::size_t>(r)];
      rd.sim = sim::simulate(tg, round_machine, so);
      if (profiled) {  // the analytic simulation stays beside the profiled one
        // A profiled compute task takes its kernel's time plus the executor's per-task
        // overhead (the machine's launch latency); everything else keeps the model.
        so.task_seconds = cuda ? cuda_profiles[row.strategy][static_cast<std::size_t>(r)].seconds : rd.profile.hot_s;
        if (cuda) so.task_chip_share = cuda_profiles[row.strategy][static_cast<std::size_t>(r)].chip_share;
        for (std::size_t i = 0; i < so.task_seconds.size(); ++i)
          if (so.task_seconds[i] >= 0) so.task_seconds[i] += round_machine.type_of(tg.tasks[i].device).launch_latency_s;
        cr.analytic_s.push_back(rd.sim.makespan_s);
        if (cache_model || cold_times || retained) {
          // The same profile with hot kernel times only, beside the cold, cached or retained one.
          cr.hot_s.push_back(sim::simulate(tg, round_machine, so).makespan_s);
          std::vector<double> task_s = rd.profile.cold_s;
          for (std::size_t i = 0; i < task_s.size(); ++i)
            if (task_s[i] >= 0) task_s[i] += round_machine.type_of(tg.tasks[i].device).launch_latency_s;
          if (retained) {
            // Cold only beside it; then each task r of the way from its DRAM time to its cold time.
            so.task_seconds = task_s;
            cr.cold_s.push_back(sim::simulate(tg, round_machine, so).makespan_s);
            const double rf = res.retained_fractions[static_cast<std::size_t>(r)];
            const std::vector<double>& dram = rd.profile.dram_s;
            for (std::size_t i = 0; i < task_s.size(); ++i)
              if (task_s[i] >= 0 && i < dram.size() && dram[i] >= 0)
                task_s[i] = retained_kernel_seconds(
                    task_s[i], dram[i] + round_machine.type_of(tg.tasks[i].device).launch_latency_s, rf);
          }
          (cache_model ? so.task_seconds_cold : so.task_seconds) = std::move(task_s);
        }
        rd.sim = sim::simulate(tg, round_machine, so);
        if (!o.interference_beside.empty())
          cr.beside_s.push_back(sim::simulate(tg, other_interference(round_machine), so).makespan_s);
        so.task_seconds.clear();
        so.task_seconds_cold.clear();
        so.task_chip_share.clear();
      }
      if (!profiled && !o.interference_beside.empty())
        cr.beside_s.push_back(sim::simulate(tg, other_interference(round_machine), so).makespan_s);
      cr.simulated_s.push_back(rd.sim.makespan_s);
      cr.measured_s.push_back(rd.measured_s);
      if (rd.unmarked_s >= 0) cr.unmarked_s.push_back(rd.unmarked_s);
    }
    // The pair shown as timelines and used for the per-kind errors: the round whose
    // run is the median (one that happened: the upper middle for an even count).
    const std::size_t mid_round = stats::median_index(cr.measured_s);
    const Round& mid = row.rounds[mid_round];
    const Timeline& median = mid.measured;
    const sim::SimResult& sr = mid.sim;
    if (!o.memory_cap.empty()) {
      json m = cap_stats[row.strategy];
      m["strategy"] = cr.strategy;
      m["policy"] = cr.policy;
      // Both peaks by one rule (timeline_peak_bytes) over each timeline: they differ only
      // where the tasks overlapped differently at run time.
      const auto simulated = timeline_peak_bytes(tg, sr.timeline);
      m["simulated_peak_memory_bytes"] = simulated.empty() ? 0 : *std::max_element(simulated.begin(), simulated.end());
      const auto peaks = timeline_peak_bytes(tg, median);
      m["measured_peak_memory_bytes"] = peaks.empty() ? 0 : *std::max_element(peaks.begin(), peaks.end());
      res.memory_cap.push_back(std::move(m));
    }
    // Per-task durations, matched by task id. The executor spends its per-task overhead
    // between spans, the simulator inside a compute or touch task (the machine's launch
    // latency): it is taken off the simulated span so that like is compared with like.
    double t0 = median.spans.empty() ? 0 : median.spans.front().start_s;
    for (const Span& s : median.spans) t0 = std::min(t0, s.start_s);
    const Machine& mid_machine = round_machines[mid_round];
    for (std::size_t i = 0; i < tg.tasks.size(); ++i) {
      const Task& t = tg.tasks[i];
      if (t.kind == TaskKind::input || t.kind == TaskKind::output) continue;
      double ds = sr.timeline.spans[i].end_s - sr.timeline.spans[i].start_s;
      if (t.kind == TaskKind::compute || t.kind == TaskKind::touch)
        ds = std::max(0.0, ds - mid_machine.type_of(t.device).launch_latency_s);
      double dm = median.spans[i].end_s - median.spans[i].start_s;
      TaskKindError& e = res.task_kinds[std::string(to_string(t.kind))];
      ++e.count;
      e.simulated_s += ds;
      e.measured_s += dm;
      e.abs_error_s += std::fabs(ds - dm);
    }
    if (!o.trace_dir.empty()) {
      std::string stem = o.trace_dir + "/" + cr.strategy + "-" + cr.policy;
      std::ostringstream a, b;
      write_chrome_trace(a, sr.timeline, &tg, &g);
      Timeline shifted = median;
      for (Span& s : shifted.spans) {
        s.start_s -= t0;
        s.end_s -= t0;
      }
      write_chrome_trace(b, shifted, &tg, &g);
      traces.stage(stem + "-simulated.json", a.str());
      traces.stage(stem + "-measured.json", b.str());
    }
    all.push_back(std::move(cr));
  }
  summarise(res, all);
  traces.commit();
  return res;
}

json to_json(const CompareRow& row) {
  const CompareRounds& rd = row.rounds;
  json r = {{"strategy", rd.strategy},
            {"policy", rd.policy},
            {"tasks", rd.tasks},
            {"simulated_s", row.simulated_s},
            {"measured_s", row.measured_s},
            {"measured_unmarked_s", row.measured_unmarked_s ? json(*row.measured_unmarked_s) : json(nullptr)},
            {"error_pct", row.error_pct},
            {"error_ci_low_pct", row.error_interval_pct.low},
            {"error_ci_high_pct", row.error_interval_pct.high},
            {"error_ci_coverage", row.error_interval_pct.coverage},
            {"measured_p10_s", row.measured_spread_s.p10},
            {"measured_p90_s", row.measured_spread_s.p90},
            {"measured_spread_pct", row.measured_spread_pct},
            {"spread_exceeds_error", row.spread_exceeds_error},
            {"round_errors_pct", row.errors_pct},
            {"round_simulated_s", rd.simulated_s},
            {"round_measured_s", rd.measured_s},
            {"correct", rd.correct},
            {"max_normwise_error", rd.max_normwise_error}};
  if (row.simulated_analytic_s) {
    r["simulated_analytic_s"] = *row.simulated_analytic_s;
    r["error_analytic_pct"] = *row.error_analytic_pct;
  }
  if (row.simulated_hot_s) {
    r["simulated_hot_s"] = *row.simulated_hot_s;
    r["error_hot_pct"] = *row.error_hot_pct;
  }
  if (row.simulated_cold_s) {
    r["simulated_cold_s"] = *row.simulated_cold_s;
    r["error_cold_pct"] = *row.error_cold_pct;
  }
  if (row.simulated_interference_beside_s) {
    r["simulated_interference_beside_s"] = *row.simulated_interference_beside_s;
    r["error_interference_beside_pct"] = *row.error_interference_beside_pct;
  }
  return r;
}

namespace {

struct RankingCounts {
  int apart = 0, agree = 0;
};

RankingCounts ranking_counts(const CompareResult& res) {
  RankingCounts c;
  for (const stats::PairOrder& p : res.pairs) {
    c.apart += p.measured_apart;
    c.agree += p.measured_apart && p.agrees;
  }
  return c;
}

}  // namespace

json compare_to_json(const CompareResult& res) {
  json rows = json::array();
  int flagged = 0;
  for (const CompareRow& row : res.rows) {
    rows.push_back(to_json(row));
    flagged += row.spread_exceeds_error;
  }
  json pair_json = json::array();
  for (const stats::PairOrder& p : res.pairs)
    pair_json.push_back({{"a", res.rows[p.a].rounds.strategy},
                         {"b", res.rows[p.b].rounds.strategy},
                         {"policy", res.rows[p.a].rounds.policy},
                         {"measured_diff_pct", p.measured_diff_pct},
                         {"simulated_diff_pct", p.simulated_diff_pct},
                         {"measured_apart", p.measured_apart},
                         {"agrees", p.measured_apart ? json(p.agrees) : json(nullptr)}});  // null: not judged
  const RankingCounts rc = ranking_counts(res);
  // preserved: null when no pair could be judged (fewer than 3 rounds, or every pair's
  // order changed between rounds).
  json ranking_check = {{"pairs", res.pairs.size()},
                        {"measured_apart", rc.apart},
                        {"measured_apart_agree", rc.agree},
                        {"preserved", rc.apart > 0 ? json(rc.apart == rc.agree) : json(nullptr)},
                        {"by_pair", pair_json}};
  json kinds = json::object();
  for (const auto& [k, e] : res.task_kinds)
    kinds[k] = {{"tasks", e.count},
                {"simulated_s", e.simulated_s},
                {"measured_s", e.measured_s},
                {"total_error_pct", e.measured_s > 0 ? (e.simulated_s - e.measured_s) / e.measured_s * 100 : 0.0},
                {"mean_abs_error_s", e.count ? e.abs_error_s / static_cast<double>(e.count) : 0.0}};
  json by_policy = json::object();
  for (const auto& [p, t] : res.kendall_tau_by_policy) by_policy[p] = t;
  return {{"graph", res.graph},
          {"devices", res.devices},
          {"backend", res.backend},
          {"launch", res.backend == "cuda" ? json(res.launch) : json(nullptr)},
          {"machine", res.machine},
          {"weights", res.weights},
          {"calibration", res.calibration},
          {"network", res.network},
          {"repeat", res.repeat},
          {"warmup", res.warmup},
          {"compute_model", res.profiled ? "profiled" : "analytic"},
          {"kernels_profiled", res.kernels_profiled},
          {"tasks_profiled", res.tasks_profiled},
          {"kernel_times", res.profiled ? json(to_string(res.kernel_times)) : json(nullptr)},
          {"cache_model", res.profiled && res.kernel_times == KernelTimes::cached},
          {"cache_model_bytes", res.cache_model_bytes},
          {"rows", rows},
          {"rows_spread_exceeds_error", flagged},
          {"mape_pct", res.mape_pct},
          {"mape_analytic_pct", res.mape_analytic_pct},
          {"mape_hot_pct", res.mape_hot_pct},
          {"mape_cold_pct", res.mape_cold_pct ? json(*res.mape_cold_pct) : json(nullptr)},
          {"interference_beside", res.interference_beside.empty() ? json(nullptr) : json(res.interference_beside)},
          {"mape_interference_beside_pct",
           res.mape_interference_beside_pct ? json(*res.mape_interference_beside_pct) : json(nullptr)},
          {"retained_fraction_by_round", res.kernel_times == KernelTimes::retained ? json(res.retained_fractions)
                                                                                   : json(nullptr)},
          {"kendall_tau", res.kendall_tau},
          {"kendall_tau_by_policy", by_policy},
          {"ranking", ranking_check},
          {"task_kinds", kinds},
          {"memory_cap", res.memory_cap},
          {"ready_order", res.ready_order},
          {"comm_priority", res.comm_priority},
          {"comm_sms", res.comm_sms},
          {"comm_mechanism", res.comm_mechanism},
          {"copy_lane", cli::copy_lane_json(res.backend, res.copy_lane)},
          {"copy_lane_cores_shared", res.backend == "cpu" ? json(res.copy_lane_cores_shared) : json(nullptr)},
          {"correct", res.correct}};
}

void print_compare(const CompareResult& res, std::FILE* out) {
  using cli::human_seconds;
  const bool profiled = res.profiled, cache_model = profiled && res.kernel_times == KernelTimes::cached;
  const std::string compute =
      !profiled      ? "analytic"
      : cache_model ? "profiled kernels (hot and cold, cache model of " +
                          cli::human_bytes(static_cast<double>(res.cache_model_bytes)) + " per worker)"
      : res.kernel_times == KernelTimes::retained
          ? "profiled kernels (retained: cold to DRAM by each round's last-level cache retention, median " +
                std::to_string(static_cast<int>(std::lround(100 * stats::median(res.retained_fractions)))) + "%)"
          : "profiled kernels (" + std::string(to_string(res.kernel_times)) + ")";
  std::fprintf(out,
               "%s on %d devices, backend %s%s, machine %s, network %s, compute %s, median of %d runs "
               "(each after %d warm-up)\n\n",
               res.graph.c_str(), res.devices, res.backend.c_str(),
               res.copy_lane != runtime::CopyLane::thread ? ""
               : res.copy_lane_cores_shared ? " (copy lane thread, sharing the workers' cores: simulated as if each "
                                              "copy lane had a core of its own)"
                                            : " (copy lane thread)",
               res.machine.c_str(), res.network.c_str(),
               compute.c_str(), res.repeat, res.warmup);
  std::fprintf(out, "  %-16s %-6s %7s %12s %12s %8s %17s %8s", "strategy", "policy", "tasks", "simulated", "measured",
               "error", "interval", "spread");
  if (profiled) std::fprintf(out, " %12s %8s", "analytic", "error");
  const bool plain = std::any_of(res.rows.begin(), res.rows.end(), [](const CompareRow& r) { return r.measured_unmarked_s.has_value(); });
  if (plain) std::fprintf(out, " %12s", "unmarked");
  std::fprintf(out, "  check\n");
  int flagged = 0;
  for (const CompareRow& r : res.rows) {
    flagged += r.spread_exceeds_error;
    char interval[48];
    std::snprintf(interval, sizeof interval, "%+.1f..%+.1f%%", r.error_interval_pct.low, r.error_interval_pct.high);
    std::fprintf(out, "  %-16s %-6s %7lld %12s %12s %+7.1f%% %17s %7.1f%%%s", r.rounds.strategy.c_str(),
                 r.rounds.policy.c_str(), static_cast<long long>(r.rounds.tasks), human_seconds(r.simulated_s).c_str(),
                 human_seconds(r.measured_s).c_str(), r.error_pct, interval, r.measured_spread_pct,
                 r.spread_exceeds_error ? "*" : " ");
    if (r.simulated_analytic_s)
      std::fprintf(out, " %12s %+7.1f%%", human_seconds(*r.simulated_analytic_s).c_str(), *r.error_analytic_pct);
    if (plain) std::fprintf(out, " %12s", r.measured_unmarked_s ? human_seconds(*r.measured_unmarked_s).c_str() : "-");
    std::fprintf(out, "  %s\n", r.rounds.correct ? "ok" : "WRONG RESULT");
  }
  std::fprintf(out,
               "\n  error: the median over the rounds of (simulated - measured) / measured, each round simulated with the\n"
               "  calibration%s measured in that round only (the medians shown need not give the same ratio)\n",
               profiled ? " and kernel profile" : "");
  const double coverage = res.rows.empty() ? 0 : res.rows.front().error_interval_pct.coverage;
  std::fprintf(out,
               "  interval: where that median lies, distribution-free (two ranks of the rounds' errors, covering it\n"
               "  with probability %.1f%% for %d rounds%s; JSON error_ci_low_pct, error_ci_high_pct, error_ci_coverage)\n",
               100 * coverage, res.repeat,
               coverage < 0.95 ? "; 95% needs 6 rounds or more: --repeat" : "; more rounds narrow it: --repeat");
  std::fprintf(out,
               "  spread: p10 to p90 of the measured rounds, in %% of their median; * marks the %d row%s whose spread is\n"
               "  wider than the error (there the machine's drift, not the model, decides the error)\n",
               flagged, flagged == 1 ? "" : "s");
  if (plain)
    std::fprintf(out,
                 "  unmarked: the same CUDA graph run without its per-task timing events, one launch timed whole (median\n"
                 "  of the rounds): what the marks the timeline needs cost\n");
  std::fprintf(out, "\n  MAPE %.1f%%", res.mape_pct);
  if (profiled && res.mape_cold_pct)
    std::fprintf(out, " (cold kernel times only %.1f%%, hot only %.1f%%, analytic %.1f%%)", *res.mape_cold_pct,
                 res.mape_hot_pct, res.mape_analytic_pct);
  else if (profiled && res.kernel_times != KernelTimes::hot)
    std::fprintf(out, " (hot kernel times only %.1f%%, analytic %.1f%%)", res.mape_hot_pct, res.mape_analytic_pct);
  else if (profiled)
    std::fprintf(out, " (analytic %.1f%%)", res.mape_analytic_pct);
  if (res.mape_interference_beside_pct)
    std::fprintf(out, "; with %s interference instead of the machine's: MAPE %.1f%%",
                 res.interference_beside == "none" ? "no" : res.interference_beside.c_str(),
                 *res.mape_interference_beside_pct);
  std::fprintf(out, "   Kendall tau (all rows) %.2f", res.kendall_tau);
  for (const auto& [p, t] : res.kendall_tau_by_policy) std::fprintf(out, "   %s %.2f", p.c_str(), t);
  const RankingCounts rc = ranking_counts(res);
  std::fprintf(out,
               "\n  ranking: %d of %zu strategy pairs (same policy) ran in the same order in every round; the "
               "simulation orders %d of them alike%s\n",
               rc.apart, res.pairs.size(), rc.agree,
               rc.apart == 0             ? " (nothing to judge: every pair's order changed between rounds)"
               : rc.apart == rc.agree ? " (ranking preserved)"
                                         : " (NOT preserved)");
  for (const stats::PairOrder& p : res.pairs)
    if (p.measured_apart && !p.agrees)
      std::fprintf(out, "    %s vs %s (%s): measured %+.1f%%, simulated %+.1f%%\n", res.rows[p.a].rounds.strategy.c_str(),
                   res.rows[p.b].rounds.strategy.c_str(), res.rows[p.a].rounds.policy.c_str(), p.measured_diff_pct,
                   p.simulated_diff_pct);
  std::fprintf(out,
               "\n  per task kind      tasks   simulated    measured   total error   mean |error| per task"
               "   (simulated spans less the per-task overhead)\n");
  for (const auto& [k, e] : res.task_kinds)
    std::fprintf(out, "  %-16s %7lld %11s %11s %+12.1f%%   %s\n", k.c_str(), static_cast<long long>(e.count),
                 human_seconds(e.simulated_s).c_str(), human_seconds(e.measured_s).c_str(),
                 e.measured_s > 0 ? (e.simulated_s - e.measured_s) / e.measured_s * 100 : 0.0,
                 human_seconds(e.count ? e.abs_error_s / static_cast<double>(e.count) : 0.0).c_str());
  if (res.memory_cap.is_array()) {
    std::fprintf(out, "\n  %-16s %11s %10s %10s %10s %16s %15s\n", "memory cap", "largest cap", "arena", "evicted", "loaded",
                 "peak simulated", "peak measured");
    auto largest = [](const json& v) {
      return v.empty() ? 0.0 : static_cast<double>(*std::max_element(v.begin(), v.end()));
    };
    for (const json& m : res.memory_cap)
      std::fprintf(out, "  %-16s %11s %10s %10s %10s %16s %15s\n", m["strategy"].get<std::string>().c_str(),
                   cli::human_bytes(largest(m["memory_cap_bytes"])).c_str(),
                   cli::human_bytes(largest(m["planned_peak_bytes"])).c_str(),
                   cli::human_bytes(m["bytes_evicted"].get<double>()).c_str(),
                   cli::human_bytes(m["bytes_loaded"].get<double>()).c_str(),
                   cli::human_bytes(m["simulated_peak_memory_bytes"].get<double>()).c_str(),
                   cli::human_bytes(m["measured_peak_memory_bytes"].get<double>()).c_str());
    std::fprintf(out,
                 "  arena: the device memory each executor allocates (the plan's highest offset + size), the same\n"
                 "  whatever the order; peak: the bytes live over the simulated and over the measured timeline (a\n"
                 "  buffer from the start of its first writer to the end of its last reader): they differ where tasks\n"
                 "  overlapped differently at run time, and neither exceeds the cap in any order\n");
    if (!res.memory_cap.empty() && res.memory_cap.front().value("offload_order", "free") == "fixed")
      std::fprintf(out,
                   "  offload order fixed: each device's kernels and host transfers ran one after another in the\n"
                   "  plan's order, transfers synchronous (the ZeRO-Offload-style baseline), in the runs and the\n"
                   "  simulations alike\n");
    else
      std::fprintf(out, "  offload order free: any ready task ran (TURNIP), in the runs and the simulations alike\n");
  }
  if (!res.trace_dir.empty()) std::fprintf(out, "\n  timelines in %s/\n", res.trace_dir.c_str());
}

}  // namespace tessel::experiments
