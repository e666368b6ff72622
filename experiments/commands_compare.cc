// tessel calibrate | compare: measure the CPU backend, and lay simulated and measured
// timelines of the same task graphs side by side.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/io.h"
#include "core/machine.h"
#include "core/task_graph.h"
#include "experiments/cli.h"
#include "runtime/calibrate.h"
#include "runtime/cpu_executor.h"
#include "runtime/profile.h"
#include "sim/simulator.h"

namespace tessel::cli {
namespace {

using nlohmann::json;

std::vector<std::string> split_list(const std::string& text, const char* what) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  if (out.empty()) fail(what, ": empty list");
  return out;
}

// Kendall's tau-a between two rankings of the same items (ties count as neither).
double kendall_tau(const std::vector<double>& a, const std::vector<double>& b) {
  const std::size_t n = a.size();
  if (n < 2) return 1.0;
  double concordant = 0, discordant = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      double s = (a[i] - a[j]) * (b[i] - b[j]);
      if (s > 0) ++concordant;
      if (s < 0) ++discordant;
    }
  return (concordant - discordant) / (static_cast<double>(n) * static_cast<double>(n - 1) / 2);
}

// The ranking check that noise cannot decide by chance. Two strategies under one
// policy are "measured apart" when one ran faster than the other in every round (the
// rounds are paired: both ran within seconds of each other); the simulated order of
// such a pair must agree with the measured one. Pairs whose measured order flips from
// round to round are reported but not judged: no simulator can be asked to order what
// the machine itself does not order repeatably.
struct PairOrder {
  std::size_t a = 0, b = 0;     // row indices
  double measured_diff_pct = 0;  // (median a - median b) / median b
  double simulated_diff_pct = 0;
  bool measured_apart = false;
  bool agrees = false;
};

std::vector<PairOrder> pair_orders(const std::vector<std::vector<double>>& measured_rounds,
                                   const std::vector<double>& measured, const std::vector<double>& simulated,
                                   const std::vector<int>& group) {
  std::vector<PairOrder> out;
  for (std::size_t a = 0; a < measured.size(); ++a)
    for (std::size_t b = a + 1; b < measured.size(); ++b) {
      if (group[a] != group[b]) continue;
      PairOrder p;
      p.a = a;
      p.b = b;
      p.measured_diff_pct = (measured[a] - measured[b]) / measured[b] * 100;
      p.simulated_diff_pct = (simulated[a] - simulated[b]) / simulated[b] * 100;
      const auto& ra = measured_rounds[a];
      const auto& rb = measured_rounds[b];
      int faster = 0, slower = 0;
      for (std::size_t r = 0; r < std::min(ra.size(), rb.size()); ++r) {
        if (ra[r] < rb[r]) ++faster;
        if (ra[r] > rb[r]) ++slower;
      }
      const int n = static_cast<int>(std::min(ra.size(), rb.size()));
      p.measured_apart = n >= 3 && (faster == n || slower == n);
      p.agrees = (faster == n && simulated[a] < simulated[b]) || (slower == n && simulated[a] > simulated[b]);
      out.push_back(p);
    }
  return out;
}

double span_of(const Timeline& tl) {
  if (tl.spans.empty()) return 0;
  double lo = tl.spans.front().start_s, hi = 0;
  for (const Span& s : tl.spans) {
    lo = std::min(lo, s.start_s);
    hi = std::max(hi, s.end_s);
  }
  return hi - lo;
}

void print_calibration(const runtime::Calibration& c) {
  std::fprintf(stderr, "  GEMM peak %s per worker, generic %s, memory %s/s, copies %s/s alone, %s/s each when all copy, "
               "%s per task, %s per bsp barrier\n",
               human_count(c.peak_flops_per_s, "flop/s").c_str(), human_count(c.generic_flops_per_s, "flop/s").c_str(),
               human_bytes(c.memory_bytes_per_s).c_str(), human_bytes(c.copy_bytes_per_s_alone).c_str(),
               human_bytes(c.copy_bytes_per_s_shared).c_str(), human_seconds(c.task_overhead_s).c_str(), human_seconds(c.barrier_latency_s).c_str());
}

runtime::Calibration run_calibration(int devices, double seconds_per_point, int rounds) {
  std::fprintf(stderr, "calibrating the CPU backend with %d workers (%d rounds)...\n", devices, rounds);
  runtime::Calibration c = runtime::calibrate_cpu({devices, seconds_per_point, rounds});
  print_calibration(c);
  return c;
}

void add_calibrate(CLI::App& app) {
  struct Opts {
    std::string backend = "cpu";
    int devices = 0;
    std::string out;
    double seconds = 0.05;
    int rounds = 3;
    bool json_out = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("calibrate", "measure a backend and write a machine JSON the simulator accepts");
  cmd->add_option("--backend", o->backend, "cpu")->capture_default_str();
  cmd->add_option("-d,--devices", o->devices, "workers (default: every core)")->check(device_count());
  cmd->add_option("-o,--output", o->out, "machine JSON to write")->required();
  cmd->add_option("--seconds", o->seconds, "measuring time per point and round")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--rounds", o->rounds, "rounds over all points; each point keeps its median")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json_out, "print the measurements as JSON");
  cmd->footer("Example:\n  tessel calibrate -d 2 -o cpu2.json && tessel simulate -w chain -d 2 -m cpu2.json");
  cmd->callback([o] {
    if (o->backend != "cpu") fail("calibrate: unknown backend '", o->backend, "' (this build calibrates: cpu)");
    int devices = o->devices > 0 ? o->devices : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    warn_oversubscribed(devices);
    runtime::Calibration c = run_calibration(devices, o->seconds, o->rounds);
    Machine m = runtime::machine_from_calibration(c);
    write_file_atomic(o->out, to_json(m).dump(2) + "\n");
    if (o->out == "-") return;  // the machine went to stdout in place of the report
    if (o->json_out) {
      json j = runtime::to_json(c);
      j["machine"] = o->out;
      print_json(j);
    } else {
      std::printf("wrote %s (%d devices)\n", o->out.c_str(), devices);
    }
  });
}

struct TaskKindError {
  std::int64_t count = 0;
  double simulated_s = 0;
  double measured_s = 0;
  double abs_error_s = 0;
};

void add_compare(CLI::App& app) {
  struct Opts {
    GraphOptions graph;
    int devices = 0;
    std::string strategies = "eindecomp,data-parallel,megatron";
    std::string policies = "async,bsp";
    std::string backend = "cpu";
    std::string machine;
    std::string network = "flow";
    int repeat = 5;
    int warmup = 1;
    double calibration_seconds = 0.05;
    std::string compute_model = "profiled";
    double profile_seconds = 0.002;
    bool no_cache_model = false;
    std::uint64_t seed = 1;
    std::string trace_dir;
    bool json_out = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "compare", "plan, simulate and run the same task graphs; lay simulated and measured times side by side");
  o->graph.add(*cmd, "chain:size=512");
  cmd->add_option("-d,--devices", o->devices, "devices (default: the largest power of two <= the cores)")
      ->check(device_count());
  cmd->add_option("-s,--strategy", o->strategies, "comma-separated strategies")->capture_default_str();
  cmd->add_option("--policy", o->policies, "comma-separated policies: async, bsp")->capture_default_str();
  cmd->add_option("--backend", o->backend, "cpu")->capture_default_str();
  cmd->add_option("-m,--machine", o->machine,
                  "machine JSON from `tessel calibrate` (default: calibrate here, one calibration round before each "
                  "timed round, so that both see the machine at the same moments)");
  cmd->add_option("--network", o->network, "simulator network model: alpha-beta or flow")->capture_default_str();
  cmd->add_option("--repeat", o->repeat, "measured runs per row; the median is reported")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", o->warmup,
                  "untimed runs of a row right before each of its timed runs, so that a timed run finds the caches as "
                  "a repeated step of the same graph leaves them (not as the calibration or another row did)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--calibration-seconds", o->calibration_seconds,
                  "without -m: measuring time of each calibration point per round")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--compute-model", o->compute_model,
                  "how the simulation times compute tasks: 'profiled' (every distinct kernel of the task graphs is "
                  "run here with all workers busy, right before each round's runs of its strategy, and that round's "
                  "time plus the per-task overhead replaces the roofline in that round's simulation — between the "
                  "kernel's hot and cold times by how much of its data the simulated worker's cache holds; the "
                  "analytic simulation is reported beside it) or 'analytic' (the machine's roofline and efficiency "
                  "table only)")
      ->capture_default_str()
      ->check(CLI::IsMember({"profiled", "analytic"}));
  cmd->add_option("--profile-seconds", o->profile_seconds,
                  "with --compute-model profiled: measuring time of each kernel per round")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-cache-model", o->no_cache_model,
               "with --compute-model profiled: time every compute task hot (its kernel's time in a loop) instead of "
               "between its hot and cold times by how much of its data the simulated worker's cache still holds");
  cmd->add_option("--seed", o->seed, "seed of the random inputs")->capture_default_str();
  cmd->add_option("--trace-dir", o->trace_dir, "write every simulated and measured timeline (Chrome trace) here");
  cmd->add_flag("--json", o->json_out, "machine-readable output");
  cmd->footer(
      "Examples:\n  tessel compare                      (the X·Y·Z chain on the cores, 3 strategies, async against bsp)\n"
      "  tessel calibrate -d 2 -o cpu2.json && tessel compare -w ffn -d 2 -m cpu2.json --json");
  cmd->callback([o] {
    if (o->backend != "cpu") fail("compare: unknown backend '", o->backend, "' (this build runs: cpu)");
    Graph g = o->graph.load();
    int devices = o->devices;
    if (devices <= 0) {  // EinDecomp's candidates need a power of two
      devices = 1;
      while (devices * 2 <= static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) devices *= 2;
    }
    std::vector<std::string> strategies = split_list(o->strategies, "--strategy");
    std::vector<runtime::Policy> policies;
    for (const auto& p : split_list(o->policies, "--policy")) policies.push_back(runtime::parse_policy(p));
    warn_oversubscribed(devices);
    // Validate everything a user gave before the long work starts.
    std::vector<Decomposition> decompositions;
    for (const auto& s : strategies) decompositions.push_back(decompose(g, s, devices));
    Machine machine;
    bool calibrated_now = o->machine.empty();
    if (!calibrated_now) {
      machine = load_machine(o->machine);
      if (machine.num_devices() != devices)
        fail("machine '", o->machine, "' describes ", machine.num_devices(), " devices but ", devices,
             " were asked for (calibrate again with -d ", devices, ")");
    }
    if (!o->trace_dir.empty()) std::filesystem::create_directories(o->trace_dir);

    runtime::TensorMap inputs = runtime::random_inputs(g, o->seed);
    runtime::TensorMap want = runtime::evaluate_reference(g, inputs);
    json rows = json::array();
    std::vector<double> sims, meas;
    std::vector<std::vector<double>> meas_rounds;
    std::vector<int> row_policy;
    std::map<std::string, TaskKindError> by_kind;
    bool all_ok = true;
    // The runs go round by round; in each round, one calibration round (without -m),
    // then per strategy one kernel-profiling round (with profiled kernels) followed by
    // that strategy's rows, each timed run right after `warmup` untimed runs of the same
    // row. Each round is then simulated with the machine figures and kernel times
    // measured in that round only, and its error is that simulation against that
    // round's run: a machine whose speed drifts by tens of percent within seconds — a
    // shared VM's does — drifts under both sides of every pair alike. A row reports the
    // medians over the rounds of the simulated time, the measured time and the error.
    struct Round {
      double measured_s = 0;
      Timeline measured;
      sim::SimResult sim;  // profiled kernels, or analytic
    };
    struct Row {
      std::size_t strategy = 0;
      runtime::Policy policy = runtime::Policy::async;
      const TaskGraph* tg = nullptr;
      std::unique_ptr<runtime::CpuExecutor> exec;  // one per row: its workspaces stay warm across rounds
      std::vector<Round> rounds;
      bool ok = true;
      double worst = 0;
    };
    std::vector<TaskGraph> graphs;
    graphs.reserve(strategies.size());
    for (const Decomposition& d : decompositions) graphs.push_back(lower(g, d));
    std::vector<Row> plan_rows;
    for (std::size_t si = 0; si < strategies.size(); ++si)
      for (runtime::Policy policy : policies) {
        Row row;
        row.strategy = si;
        row.policy = policy;
        row.tg = &graphs[si];
        row.exec = std::make_unique<runtime::CpuExecutor>(runtime::CpuOptions{policy, true});
        plan_rows.push_back(std::move(row));
      }
    std::unique_ptr<runtime::CpuCalibrator> calibrator;
    if (calibrated_now) {
      std::fprintf(stderr, "calibrating the CPU backend with %d workers, one round before each timed round\n",
                   devices);
      calibrator = std::make_unique<runtime::CpuCalibrator>(runtime::CalibrationOptions{devices, o->calibration_seconds, 1});
    }
    const bool profiled = o->compute_model == "profiled";
    // The cache model needs a per-core cache size: a calibration here always has one; a
    // given machine may not (then the cold profile would change nothing: not taken).
    bool machine_has_cache = calibrated_now;
    for (const DeviceType& t : machine.device_types) machine_has_cache = machine_has_cache || t.cache_capacity_bytes > 0;
    const bool cache_model = profiled && !o->no_cache_model && machine_has_cache;
    std::vector<std::unique_ptr<runtime::KernelProfiler>> profilers;  // per strategy
    std::size_t kernels_profiled = 0;
    if (profiled) {
      for (const TaskGraph& tg : graphs) {
        profilers.push_back(std::make_unique<runtime::KernelProfiler>(
            g, tg, runtime::KernelProfileOptions{devices, o->profile_seconds, 0, cache_model}));
        kernels_profiled += profilers.back()->kernels();
      }
      std::fprintf(stderr, "profiling %zu kernels with %d workers, each strategy's right before its runs\n",
                   kernels_profiled, devices);
    }
    for (int round = 0; round < o->repeat; ++round) {
      if (calibrator) calibrator->round();
      for (std::size_t si = 0; si < strategies.size(); ++si) {
        if (profiled) profilers[si]->round();
        for (Row& row : plan_rows) {
          if (row.strategy != si) continue;
          for (int run = 0; run <= o->warmup; ++run) {
            runtime::RunResult res = row.exec->run(g, *row.tg, inputs);
            // Every run's result is checked, the untimed ones too: a wrong answer is
            // never hidden behind a median.
            bool ok = false;
            json check = check_outputs(g, res.outputs, want, &ok);
            row.ok = row.ok && ok;
            for (const auto& c : check) row.worst = std::max(row.worst, c["normwise_rel_error"].get<double>());
            if (run == o->warmup) {
              Round& r = row.rounds.emplace_back();
              r.measured_s = span_of(res.timeline);
              r.measured = std::move(res.timeline);
            }
          }
        }
      }
    }
    json calibration;  // null unless calibrated here
    if (calibrator) {
      runtime::Calibration c = calibrator->result();
      print_calibration(c);
      calibration = runtime::to_json(c);
    }
    // The machine each round is simulated on: that round's calibration, or the given one.
    std::vector<Machine> round_machines;
    for (int r = 0; r < o->repeat; ++r)
      round_machines.push_back(calibrator ? runtime::machine_from_calibration(calibrator->round_result(r)) : machine);
    auto median_of = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    for (Row& row : plan_rows) {
      const TaskGraph& tg = *row.tg;
      sim::SimOptions so;
      so.network = o->network;
      so.policy = row.policy == runtime::Policy::async ? sim::Policy::async : sim::Policy::bsp;
      std::vector<double> sim_s, analytic_s, hot_s, meas_s, err, err_analytic, err_hot;
      for (int r = 0; r < static_cast<int>(row.rounds.size()); ++r) {
        Round& rd = row.rounds[static_cast<std::size_t>(r)];
        const Machine& round_machine = round_machines[static_cast<std::size_t>(r)];
        rd.sim = sim::simulate(tg, round_machine, so);
        if (profiled) {  // the analytic simulation stays beside the profiled one
          // A profiled compute task takes its kernel's time plus the executor's
          // per-task overhead (the machine's launch latency); everything else keeps
          // the model.
          so.task_seconds = profilers[row.strategy]->task_seconds(r);
          for (std::size_t i = 0; i < so.task_seconds.size(); ++i)
            if (so.task_seconds[i] >= 0) so.task_seconds[i] += round_machine.type_of(tg.tasks[i].device).launch_latency_s;
          analytic_s.push_back(rd.sim.makespan_s);
          err_analytic.push_back((rd.sim.makespan_s - rd.measured_s) / rd.measured_s * 100);
          if (cache_model) {
            // The same profile with hot kernel times only, beside the cache model's.
            const double hot = sim::simulate(tg, round_machine, so).makespan_s;
            hot_s.push_back(hot);
            err_hot.push_back((hot - rd.measured_s) / rd.measured_s * 100);
            so.task_seconds_cold = profilers[row.strategy]->task_seconds_cold(r);
            for (std::size_t i = 0; i < so.task_seconds_cold.size(); ++i)
              if (so.task_seconds_cold[i] >= 0)
                so.task_seconds_cold[i] += round_machine.type_of(tg.tasks[i].device).launch_latency_s;
          }
          rd.sim = sim::simulate(tg, round_machine, so);
          so.task_seconds.clear();
          so.task_seconds_cold.clear();
        }
        sim_s.push_back(rd.sim.makespan_s);
        meas_s.push_back(rd.measured_s);
        err.push_back((rd.sim.makespan_s - rd.measured_s) / rd.measured_s * 100);
      }
      const double simulated = median_of(sim_s), measured_s = median_of(meas_s);
      // The pair shown as timelines and used for the per-kind errors: the round whose
      // run is the median.
      std::vector<std::size_t> order(row.rounds.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::sort(order.begin(), order.end(),
                [&](std::size_t a, std::size_t b) { return row.rounds[a].measured_s < row.rounds[b].measured_s; });
      const Round& mid = row.rounds[order[order.size() / 2]];
      const Timeline& median = mid.measured;
      const sim::SimResult& sr = mid.sim;
      all_ok = all_ok && row.ok;
      // Per-task durations, matched by task id. The executor spends its per-task
      // overhead between spans, the simulator inside a compute or touch task (the
      // machine's launch latency): it is taken off the simulated span so that like is
      // compared with like.
      double t0 = median.spans.empty() ? 0 : median.spans.front().start_s;
      for (const Span& s : median.spans) t0 = std::min(t0, s.start_s);
      const Machine& mid_machine = round_machines[static_cast<std::size_t>(order[order.size() / 2])];
      for (std::size_t i = 0; i < tg.tasks.size(); ++i) {
        const Task& t = tg.tasks[i];
        if (t.kind == TaskKind::input || t.kind == TaskKind::output) continue;
        double ds = sr.timeline.spans[i].end_s - sr.timeline.spans[i].start_s;
        if (t.kind == TaskKind::compute || t.kind == TaskKind::touch)
          ds = std::max(0.0, ds - mid_machine.type_of(t.device).launch_latency_s);
        double dm = median.spans[i].end_s - median.spans[i].start_s;
        TaskKindError& e = by_kind[std::string(to_string(t.kind))];
        ++e.count;
        e.simulated_s += ds;
        e.measured_s += dm;
        e.abs_error_s += std::fabs(ds - dm);
      }
      std::string policy_name(runtime::to_string(row.policy));
      if (!o->trace_dir.empty()) {
        std::string stem = o->trace_dir + "/" + strategies[row.strategy] + "-" + policy_name;
        std::ostringstream a, b;
        write_chrome_trace(a, sr.timeline, &tg, &g);
        Timeline shifted = median;
        for (Span& s : shifted.spans) {
          s.start_s -= t0;
          s.end_s -= t0;
        }
        write_chrome_trace(b, shifted, &tg, &g);
        write_file_atomic(stem + "-simulated.json", a.str());
        write_file_atomic(stem + "-measured.json", b.str());
      }
      sims.push_back(simulated);
      meas.push_back(measured_s);
      meas_rounds.push_back(meas_s);
      row_policy.push_back(static_cast<int>(row.policy));
      json r = {{"strategy", strategies[row.strategy]},
                {"policy", policy_name},
                {"tasks", tg.size()},
                {"simulated_s", simulated},
                {"measured_s", measured_s},
                {"error_pct", median_of(err)},
                {"round_errors_pct", err},
                {"round_simulated_s", sim_s},
                {"round_measured_s", meas_s},
                {"correct", row.ok},
                {"max_normwise_error", row.worst}};
      if (profiled) {
        r["simulated_analytic_s"] = median_of(analytic_s);
        r["error_analytic_pct"] = median_of(err_analytic);
      }
      if (profiled && cache_model) {
        r["simulated_hot_s"] = median_of(hot_s);
        r["error_hot_pct"] = median_of(err_hot);
      }
      rows.push_back(std::move(r));
    }
    auto mean_abs = [&](const char* key) {
      double sum = 0;
      for (const auto& r : rows) sum += std::fabs(r[key].get<double>());
      return sum / static_cast<double>(rows.size());
    };
    const double mape = mean_abs("error_pct");
    const double mape_analytic = profiled ? mean_abs("error_analytic_pct") : mape;
    const double mape_hot = profiled && cache_model ? mean_abs("error_hot_pct") : mape;
    double tau = kendall_tau(sims, meas);
    // The ranking of strategies under each policy.
    json ranking = json::object();
    for (runtime::Policy policy : policies) {
      std::vector<double> s, m;
      for (const auto& r : rows)
        if (r["policy"] == std::string(runtime::to_string(policy))) {
          s.push_back(r["simulated_s"]);
          m.push_back(r["measured_s"]);
        }
      ranking[std::string(runtime::to_string(policy))] = kendall_tau(s, m);
    }
    std::vector<PairOrder> pairs = pair_orders(meas_rounds, meas, sims, row_policy);
    json pair_json = json::array();
    int apart = 0, apart_agree = 0;
    for (const PairOrder& p : pairs) {
      apart += p.measured_apart;
      apart_agree += p.measured_apart && p.agrees;
      pair_json.push_back({{"a", rows[p.a]["strategy"]},
                           {"b", rows[p.b]["strategy"]},
                           {"policy", rows[p.a]["policy"]},
                           {"measured_diff_pct", p.measured_diff_pct},
                           {"simulated_diff_pct", p.simulated_diff_pct},
                           {"measured_apart", p.measured_apart},
                           {"agrees", p.measured_apart ? json(p.agrees) : json(nullptr)}});  // null: not judged
    }
    // preserved: null when no pair could be judged (fewer than 3 rounds, or every
    // pair's order changed between rounds).
    json ranking_check = {{"pairs", pairs.size()},
                          {"measured_apart", apart},
                          {"measured_apart_agree", apart_agree},
                          {"preserved", apart > 0 ? json(apart == apart_agree) : json(nullptr)},
                          {"by_pair", pair_json}};
    json kinds = json::object();
    for (const auto& [k, e] : by_kind)
      kinds[k] = {{"tasks", e.count},
                  {"simulated_s", e.simulated_s},
                  {"measured_s", e.measured_s},
                  {"total_error_pct", e.measured_s > 0 ? (e.simulated_s - e.measured_s) / e.measured_s * 100 : 0.0},
                  {"mean_abs_error_s", e.count ? e.abs_error_s / static_cast<double>(e.count) : 0.0}};
    if (o->json_out) {
      print_json({{"graph", o->graph.describe()},
                  {"devices", devices},
                  {"backend", o->backend},
                  {"machine", calibrated_now ? std::string("calibrated now") : o->machine},
                  {"calibration", calibration},
                  {"network", o->network},
                  {"repeat", o->repeat},
                  {"warmup", o->warmup},
                  {"compute_model", o->compute_model},
                  {"kernels_profiled", kernels_profiled},
                  {"cache_model", cache_model},
                  {"rows", rows},
                  {"mape_pct", mape},
                  {"mape_analytic_pct", mape_analytic},
                  {"mape_hot_pct", mape_hot},
                  {"kendall_tau", tau},
                  {"kendall_tau_by_policy", ranking},
                  {"ranking", ranking_check},
                  {"task_kinds", kinds},
                  {"correct", all_ok}});
    } else {
      std::printf("%s on %d devices, backend %s, machine %s, network %s, compute %s, median of %d runs "
                  "(each after %d warm-up)\n\n",
                  o->graph.describe().c_str(), devices, o->backend.c_str(),
                  calibrated_now ? "calibrated now" : o->machine.c_str(), o->network.c_str(),
                  profiled ? (cache_model ? "profiled kernels (hot and cold, cache model)" : "profiled kernels (hot)")
                           : "analytic",
                  o->repeat, o->warmup);
      std::printf("  %-16s %-6s %7s %12s %12s %8s", "strategy", "policy", "tasks", "simulated", "measured", "error");
      if (profiled) std::printf(" %12s %8s", "analytic", "error");
      std::printf("  check\n");
      for (const auto& r : rows) {
        std::printf("  %-16s %-6s %7lld %12s %12s %+7.1f%%", r["strategy"].get<std::string>().c_str(),
                    r["policy"].get<std::string>().c_str(), static_cast<long long>(r["tasks"].get<std::int64_t>()),
                    human_seconds(r["simulated_s"]).c_str(), human_seconds(r["measured_s"]).c_str(),
                    r["error_pct"].get<double>());
        if (profiled)
          std::printf(" %12s %+7.1f%%", human_seconds(r["simulated_analytic_s"]).c_str(),
                      r["error_analytic_pct"].get<double>());
        std::printf("  %s\n", r["correct"].get<bool>() ? "ok" : "WRONG RESULT");
      }
      std::printf("\n  error: the median over the rounds of (simulated - measured) / measured, each round simulated with the\n"
                  "  calibration%s measured in that round only (the medians shown need not give the same ratio)\n",
                  profiled ? " and kernel profile" : "");
      std::printf("\n  MAPE %.1f%%", mape);
      if (profiled && cache_model) std::printf(" (hot kernel times only %.1f%%, analytic %.1f%%)", mape_hot, mape_analytic);
      else if (profiled) std::printf(" (analytic %.1f%%)", mape_analytic);
      std::printf("   Kendall tau (all rows) %.2f", tau);
      for (const auto& [p, t] : ranking.items()) std::printf("   %s %.2f", p.c_str(), t.get<double>());
      std::printf("\n  ranking: %d of %zu strategy pairs (same policy) ran in the same order in every round; the "
                  "simulation orders %d of them alike%s\n",
                  apart, pairs.size(), apart_agree,
                  apart == 0 ? " (nothing to judge: every pair's order changed between rounds)"
                  : apart == apart_agree ? " (ranking preserved)"
                                         : " (NOT preserved)");
      for (const PairOrder& p : pairs)
        if (p.measured_apart && !p.agrees)
          std::printf("    %s vs %s (%s): measured %+.1f%%, simulated %+.1f%%\n",
                      rows[p.a]["strategy"].get<std::string>().c_str(), rows[p.b]["strategy"].get<std::string>().c_str(),
                      rows[p.a]["policy"].get<std::string>().c_str(), p.measured_diff_pct, p.simulated_diff_pct);
      std::printf("\n  per task kind      tasks   simulated    measured   total error   mean |error| per task"
                  "   (simulated spans less the per-task overhead)\n");
      for (const auto& [k, e] : by_kind)
        std::printf("  %-16s %7lld %11s %11s %+12.1f%%   %s\n", k.c_str(), static_cast<long long>(e.count),
                    human_seconds(e.simulated_s).c_str(), human_seconds(e.measured_s).c_str(),
                    e.measured_s > 0 ? (e.simulated_s - e.measured_s) / e.measured_s * 100 : 0.0,
                    human_seconds(e.count ? e.abs_error_s / static_cast<double>(e.count) : 0.0).c_str());
      if (!o->trace_dir.empty()) std::printf("\n  timelines in %s/\n", o->trace_dir.c_str());
    }
    if (!all_ok) fail("compare: a run's result differs from the reference evaluator (see the check column)");
  });
}

}  // namespace

void add_compare_commands(CLI::App& app) {
  add_calibrate(app);
  add_compare(app);
}

}  // namespace tessel::cli
