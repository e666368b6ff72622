// tessel workloads | lower | einsum | run
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/io.h"
#include "core/stats.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "experiments/backend.h"
#include "experiments/cli.h"
#include "experiments/memory_cap.h"
#include "runtime/cpu_executor.h"
#include "runtime/executor.h"
#include "runtime/npy.h"

namespace tessel::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void print_summary(const TaskGraph& tg) {
  auto s = tg.summary();
  std::printf("  tasks        %s\n", task_counts(tg).c_str());
  std::printf("  buffers      %zu\n", tg.buffers.size());
  std::printf("  bytes moved  %s between devices\n", human_bytes(static_cast<double>(s.bytes_moved)).c_str());
  std::printf("  bytes copied %s by touches\n", human_bytes(static_cast<double>(s.bytes_touched)).c_str());
  std::printf("  flops        %s\n", human_count(s.flops, "flop").c_str());
}

std::unique_ptr<runtime::Executor> make_executor(const std::string& backend, const std::string& policy,
                                                 const CudaCliOptions& cuda = {},
                                                 runtime::CopyLane copy_lane = runtime::CopyLane::worker) {
  runtime::Policy p = runtime::parse_policy(policy);
  if (backend == "cpu") {
    runtime::CpuOptions o;
    o.policy = p;
    o.copy_lane = copy_lane;
    return std::make_unique<runtime::CpuExecutor>(o);
  }
  if (backend == "block") {
    if (p != runtime::Policy::async) fail("--backend block runs tasks one by one in order; it has no --policy bsp");
    return std::make_unique<runtime::BlockExecutor>();
  }
  if (backend == "cuda") return make_cuda_executor(p, cuda);
  if (backend == "mpi") return make_mpi_executor(p);
  fail("unknown backend '", backend, "' (expected cpu, block, cuda or mpi)");
}

void add_workloads(CLI::App& app) {
  auto* cmd = app.add_subcommand("workloads", "list the built-in workloads and their parameters");
  auto json_out = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json_out, "machine-readable output");
  cmd->footer(
      "Examples:\n"
      "  tessel workloads\n"
      "  tessel workloads --json | python3 -c 'import json,sys; print([w[\"name\"] for w in json.load(sys.stdin)])'\n"
      "  tessel simulate -w llama-block:model=7b,seq=2048 -d 8 -s eindecomp -m h100-sxm-8   (NAME:key=value,...)");
  cmd->callback([json_out] {
    if (*json_out) {
      json list = json::array();
      for (const auto& w : workloads()) {
        json params = json::array();
        for (const auto& p : w.params) params.push_back({{"name", p.name}, {"default", p.default_value}, {"help", p.help}});
        Graph g = build_workload(w.name);
        list.push_back({{"name", w.name}, {"help", w.help}, {"params", params}, {"default_nodes", g.size()}});
      }
      print_json(list);
      return;
    }
    for (const auto& w : workloads()) {
      std::printf("%s\n    %s\n", w.name.c_str(), w.help.c_str());
      for (const auto& p : w.params)
        std::printf("    %-8s %-6s %s\n", p.name.c_str(), p.default_value.empty() ? "-" : p.default_value.c_str(),
                    p.help.c_str());
    }
    std::printf("\nuse as NAME:key=value,...  e.g.  -w chain:size=512  or  -w llama-block:model=7b,batch=2\n");
  });
}

void add_lower(CLI::App& app) {
  struct Opts {
    GraphOptions graph;
    DecompositionOptions dec;
    bool json_out = false;
    std::string decomposition_out;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("lower", "lower a graph under a decomposition to a task graph and summarise it");
  o->graph.add(*cmd, "chain");
  o->dec.add(*cmd);
  cmd->add_flag("--json", o->json_out, "machine-readable output");
  cmd->add_option("--write-decomposition", o->decomposition_out, "write the decomposition used as JSON");
  cmd->footer(
      "Examples:\n"
      "  tessel lower -w chain:size=1024 -d 8\n"
      "  tessel lower -w chain -d 4 --parts XY=2x2x1,XYZ=4x1x1\n"
      "  tessel lower -g graph.json --decomposition plan.json --json");
  cmd->callback([o] {
    Graph g = o->graph.load();
    Decomposition d = o->dec.load(g);
    auto t0 = Clock::now();
    TaskGraph tg = lower(g, d, o->dec.lower_options());
    double lower_s = seconds_since(t0);
    if (!o->decomposition_out.empty()) {
      OutputBatch out({{"-g", o->graph.graph_file}, {"--decomposition", o->dec.decomposition_file}});
      out.add("--write-decomposition", o->decomposition_out);
      out.stage(o->decomposition_out, to_json(d, g).dump(2) + "\n");
      out.commit();
    }
    if (o->decomposition_out == "-") return;  // the decomposition went to stdout in place of the report
    if (o->json_out) {
      json j = summary_json(tg);
      j["graph"] = o->graph.describe();
      j["nodes"] = g.size();
      j["lower_wall_s"] = lower_s;
      j["tasks_per_s"] = lower_s > 0 ? static_cast<double>(tg.size()) / lower_s : 0.0;
      print_json(j);
      return;
    }
    std::printf("%s: %zu nodes on %d devices, lowered in %.3f ms\n", o->graph.describe().c_str(), g.size(),
                d.num_devices, lower_s * 1e3);
    print_summary(tg);
  });
}

void add_einsum(CLI::App& app) {
  struct Opts {
    std::string subscripts;
    std::vector<std::string> files;
    std::string out;
    int devices = 1;
    std::string parts;
    std::string join;
    std::string agg;
    std::string backend = "cpu";
    CudaCliOptions cuda;
    std::string strategy;
    SearchOptions search;
    bool json_out = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "einsum", "numpy.einsum from the shell, computed by decomposing over N devices and running block by block");
  cmd->add_option("subscripts", o->subscripts, "subscripts, numpy syntax: ij,jk->ik  ii->i  ij,ij->")->required();
  cmd->add_option("operands", o->files, ".npy files (float32 or float64, C order)")->required();
  cmd->add_option("-o,--output", o->out, "result .npy file")->required();
  cmd->add_option("-d,--devices", o->devices, "number of devices")->capture_default_str()->check(device_count());
  cmd->add_option("--parts", o->parts, "parts per index letter, e.g. i=2,k=2 (instead of --strategy)");
  cmd->add_option("-s,--strategy", o->strategy,
                  "planner strategy (default: eindecomp when N is a power of two, else split-largest)");
  o->search.add(*cmd);
  cmd->add_option("--join", o->join, "scalar join function (default: product of the operands), e.g. 'add(x0,x1)'");
  cmd->add_option("--agg", o->agg, "aggregation: sum (default), max, min, prod");
  cmd->add_option("--backend", o->backend,
                  "cpu (a worker thread per device), block (one thread, in order), cuda (GPUs; see --gpus) or mpi "
                  "(mpirun -np R tessel ...: each rank runs its share of the devices)")
      ->capture_default_str();
  o->cuda.add(*cmd);
  cmd->add_flag("--json", o->json_out, "machine-readable report on stdout");
  cmd->footer("Example (quote the subscripts: the shell reads > as a redirection):\n"
              "  tessel einsum 'ij,jk->ik' a.npy b.npy -o c.npy --devices 4 --parts i=2,k=2");
  cmd->callback([o, cmd] {
    CudaCliOptions::check_backend(*cmd, o->backend);
    if (o->backend != "mpi") {  // -o may not name an operand: the result would replace it (mpi: rank 0 writes)
      std::vector<std::pair<std::string, std::string>> inputs;
      for (std::size_t i = 0; i < o->files.size(); ++i) inputs.emplace_back("operand " + std::to_string(i + 1), o->files[i]);
      OutputBatch(inputs).add("-o", o->out);
    }
    std::vector<Tensor> operands;
    for (const auto& f : o->files) operands.push_back(runtime::read_npy(f));
    DType dtype = DType::f32;
    for (const auto& t : operands)
      if (t.dtype == DType::f64) dtype = DType::f64;
    std::optional<Agg> agg;
    if (!o->agg.empty()) agg = parse_agg(o->agg, "--agg");
    GraphBuilder b(dtype);
    std::vector<NodeId> args;
    runtime::TensorMap inputs;
    for (std::size_t i = 0; i < operands.size(); ++i) {
      std::string name = "in" + std::to_string(i);
      args.push_back(b.input(name, operands[i].shape));
      operands[i].dtype = dtype;
      inputs[name] = operands[i];
    }
    NodeId e = b.einsum(o->subscripts, args, o->join, agg, "einsum");
    b.output(e, "result");
    Graph g = b.build();
    // Parts per join index from letters.
    Subscripts subs = parse_subscripts(o->subscripts);
    std::string order = subs.output;
    for (const auto& in : subs.inputs)
      for (char c : in)
        if (order.find(c) == std::string::npos) order += c;
    std::vector<std::vector<int>> parts(g.size());
    Shape js = g.join_shape(e);
    Decomposition d;
    if (o->parts.empty()) {
      // A planner strategy; by default EinDecomp where n is a power of two.
      const bool power_of_two = (o->devices & (o->devices - 1)) == 0;
      d = decompose(g, !o->strategy.empty() ? o->strategy : power_of_two ? "eindecomp" : "split-largest", o->devices,
                    "resident", nullptr, o->search);
    } else {
      if (!o->strategy.empty()) fail("give either --parts or --strategy, not both");
      parts[e.index()].assign(js.size(), 1);
      for (const auto& [letter, value] : parse_key_values(o->parts, "--parts")) {
        if (letter.size() != 1 || order.find(letter[0]) == std::string::npos)
          fail("--parts: '", letter, "' is not an index letter of ", o->subscripts);
        int v = 0;
        try {
          v = std::stoi(value);
        } catch (...) {
          fail("--parts: ", letter, "=", value, " is not an integer");
        }
        if (v < 1) fail("--parts: ", letter, "=", value, " must be >= 1");
        parts[e.index()][order.find(letter[0])] = v;
      }
      d = decomposition_from_parts(g, o->devices, parts);
      // Operand i lives whole on device i mod N; the result is gathered on device 0.
      for (std::size_t i = 0; i < args.size(); ++i)
        d.nodes[args[i].index()].devices = {DeviceId(static_cast<int>(i) % o->devices)};
    }
    TaskGraph tg = lower(g, d);
    auto exec = make_executor(o->backend, "async", o->cuda);
    if (!reports_results(*exec)) {  // an MPI rank other than 0: its share of the run, nothing else
      (void)exec->run(g, tg, inputs);
      return;
    }
    auto t0 = Clock::now();
    runtime::RunResult r = exec->run(g, tg, inputs);
    double run_s = seconds_since(t0);
    bool ok = false;
    json check = check_outputs(g, r.outputs, runtime::evaluate_reference(g, inputs, o->backend == "cuda"), &ok,
                               o->backend);
    if (!ok) fail("einsum: the decomposed result differs from the reference evaluator: ", check.dump());
    runtime::write_npy(o->out, r.outputs.at("result"));
    if (o->out == "-") return;  // the .npy went to stdout in place of the report
    if (o->json_out) {
      json j = summary_json(tg);
      j["subscripts"] = o->subscripts;
      j["parts"] = d.plan(e).partition.parts();
      j["output"] = o->out;
      j["shape"] = r.outputs.at("result").shape;
      j["run_wall_s"] = run_s;
      j["check"] = check;
      print_json(j);
    }
  });
}

void add_run(CLI::App& app) {
  struct Opts {
    GraphOptions graph;
    DecompositionOptions dec;  // its --seed also seeds the random inputs
    std::string backend = "cpu";
    CudaCliOptions cuda;
    std::string policy = "async";
    int repeat = 1;
    bool json_out = false;
    std::string trace;
    std::string memory_cap;
    std::string offload_order = "free";
    std::string copy_lane = "worker";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("run",
                                 "run a workload's task graph for real on random inputs, time it, and check it "
                                 "against the reference evaluator");
  o->graph.add(*cmd, "chain");
  o->dec.add(*cmd);
  cmd->add_option("--backend", o->backend,
                  "cpu (one worker thread per device), block (one thread, in order), cuda (GPUs; see --gpus) or mpi "
                  "(mpirun -np R tessel ...: each rank runs its share of the devices)")
      ->capture_default_str();
  o->cuda.add(*cmd);
  cmd->add_option("--policy", o->policy, "async (no barriers) or bsp (barriers between phases)")->capture_default_str();
  cmd->add_option("--repeat", o->repeat, "runs to time, 1 to 10000; the median is reported, every run is checked")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxRepeat));
  cmd->add_option("--trace", o->trace, "write the measured timeline (median run) as Chrome-trace JSON");
  add_memory_cap_option(*cmd, o->memory_cap,
                        ". Planned once, with the one-range prefetch rule (simulate plans with each rule and keeps "
                        "the fastest by simulation); not with --collectives nodes");
  add_offload_order_option(*cmd, o->offload_order);
  add_copy_lane_option(*cmd, o->copy_lane);
  cmd->add_flag("--json", o->json_out, "machine-readable output");
  cmd->footer(
      "Examples:\n  tessel run -w ffn -d 2\n  tessel run -w llama-block:model=tiny -d 2 --memory-cap 50%\n"
      "  tessel run -w llama-block:model=tiny -d 2 --memory-cap 50% --offload-order fixed\n"
      "  tessel run -w llama-block:model=tiny -d 1 --memory-cap 50% --copy-lane thread\n  tessel run -w chain:size=1024 -d 2 --policy bsp --repeat 5\n"
      "  tessel run -w llama-block:model=tiny -d 8 --backend block --json");
  cmd->callback([o, cmd] {
    CudaCliOptions::check_backend(*cmd, o->backend);
    const OffloadOrder offload_order = parse_offload_order(o->offload_order);
    check_offload_order(offload_order, o->memory_cap);
    // The trace's place checked before the runs (mpi: rank 0 writes it).
    OutputBatch out({{"-g", o->graph.graph_file}, {"--decomposition", o->dec.decomposition_file}});
    if (o->backend != "mpi") out.add("--trace", o->trace);
    Graph g = o->graph.load();
    Decomposition d = o->dec.load(g);
    const runtime::CopyLane copy_lane = runtime::parse_copy_lane(o->copy_lane, "--copy-lane");
    check_copy_lane(copy_lane, o->backend, !o->memory_cap.empty(), offload_order, d.num_devices);
    auto exec = make_executor(o->backend, o->policy, o->cuda, copy_lane);
    check_mpi_memory_cap(o->backend, !o->memory_cap.empty());
    if (o->backend == "cpu") warn_oversubscribed(d.num_devices);
    auto t0 = Clock::now();
    TaskGraph tg = lower(g, d, o->dec.lower_options());
    double lower_s = seconds_since(t0);
    std::optional<MemoryCapped> capped;
    if (!o->memory_cap.empty()) {
      check_memory_cap_policy(o->policy);
      // simulate plans the rings it expands a collective node into; the executors run a
      // node as one primitive (cpu) or as its moves (block, mpi, cuda), neither planned.
      if (tg.has_collectives())
        fail("--memory-cap: not with --collectives nodes yet: the executors run a collective node as one primitive "
             "or as its moves, not as the ring `simulate` plans (use --collectives moves)");
      capped = cap_memory(tg, o->memory_cap, nullptr, "one-range", {}, &g);
      // On the cpu and block backends the devices' arenas are this machine's RAM too.
      check_ram(*capped, o->backend != "cuda");
      apply_offload_order(*capped, offload_order);
      tg = std::move(capped->graph);
    }
    runtime::TensorMap inputs = runtime::random_inputs(g, o->dec.search.seed);
    if (!reports_results(*exec)) {  // an MPI rank other than 0: its share of every run, nothing else
      for (int rep = 0; rep < o->repeat; ++rep) (void)exec->run(g, tg, inputs);
      return;
    }
    t0 = Clock::now();
    runtime::TensorMap want = runtime::evaluate_reference(g, inputs, o->backend == "cuda");
    double ref_s = seconds_since(t0);
    // Every run's outputs are checked as soon as it ends and then dropped, so that memory
    // holds one run's outputs and the timelines, not --repeat copies of the outputs.
    std::vector<double> times;
    std::vector<runtime::RunResult> runs;
    std::vector<json> checks;
    bool ok = true;
    int first_bad = -1;
    for (int rep = 0; rep < o->repeat; ++rep) {
      t0 = Clock::now();
      runtime::RunResult res = exec->run(g, tg, inputs);
      times.push_back(seconds_since(t0));
      bool run_ok = false;
      checks.push_back(check_outputs(g, res.outputs, want, &run_ok, o->backend));
      if (!run_ok && first_bad < 0) first_bad = rep;
      ok = ok && run_ok;
      res.outputs.clear();
      runs.push_back(std::move(res));
    }
    // The run reported and traced is one that happened: the median for an odd count,
    // the upper middle for an even one (stats::median_index). Its check is reported,
    // unless an earlier or later run failed: then the first failing run's.
    const std::size_t median = stats::median_index(times);
    const runtime::RunResult& r = runs[median];
    double run_s = times[median];
    // The task graph's own time (first task start to last task end, as compare and the
    // simulator count it), without placing inputs, starting workers and gathering outputs.
    double graph_s = 0;
    {
      double lo = 0, hi = 0;
      bool first = true;
      for (const Span& sp : r.timeline.spans) {
        lo = first ? sp.start_s : std::min(lo, sp.start_s);
        hi = first ? sp.end_s : std::max(hi, sp.end_s);
        first = false;
      }
      graph_s = hi - lo;
    }
    json check = first_bad >= 0 ? checks[static_cast<std::size_t>(first_bad)] : checks[median];
    if (!o->trace.empty()) {
      std::ostringstream os;
      write_chrome_trace(os, r.timeline, &tg, &g);
      if (o->backend == "mpi") out.add("--trace", o->trace);
      out.stage(o->trace, os.str());
      out.commit();
    }
    if (o->trace == "-") {  // the trace went to stdout in place of the report
      if (!ok) fail("run: the result differs from the reference evaluator (", check.dump(), ")");
      return;
    }
    auto s = tg.summary();
    if (o->json_out) {
      json j = summary_json(tg);
      j["graph"] = o->graph.describe();
      j["weights"] = o->dec.weights_used();
      j["backend"] = exec->name();
      j["launch"] = o->backend == "cuda" ? json(o->cuda.launch) : json(nullptr);
      j["policy"] = o->policy;
      j["copy_lane"] = copy_lane_json(o->backend, copy_lane);
      j["copy_lane_cores_shared"] =
          o->backend == "cpu" ? json(copy_lane_cores_shared(copy_lane, d.num_devices)) : json(nullptr);
      j["lower_wall_s"] = lower_s;
      j["reference_wall_s"] = ref_s;
      j["measured_s"] = run_s;
      j["measured_all_s"] = times;
      j["graph_s"] = graph_s;
      // --backend cuda --launch graph: the same graph without per-task marks, timed whole.
      j["graph_unmarked_s"] = r.unmarked_span_s >= 0 ? json(r.unmarked_span_s) : json(nullptr);
      j["graph_flops_per_s"] = graph_s > 0 ? s.flops / graph_s : 0.0;
      j["flops_per_s"] = run_s > 0 ? s.flops / run_s : 0.0;
      j["check"] = check;
      j["correct"] = ok;  // every output within tolerance, as compare names it
      if (capped) {
        json mc = memory_cap_json(*capped);
        const auto peaks = timeline_peak_bytes(tg, r.timeline);
        mc["measured_peak_memory_bytes"] = peaks.empty() ? 0 : *std::max_element(peaks.begin(), peaks.end());
        j["memory_cap"] = mc;
      }
      print_json(j);
    } else {
      std::printf("%s on %d devices (%zu nodes), backend %s, policy %s%s\n", o->graph.describe().c_str(),
                  d.num_devices, g.size(), exec->name().c_str(), o->policy.c_str(),
                  copy_lane == runtime::CopyLane::thread ? ", copy lane thread" : "");
      print_summary(tg);
      std::printf("  lowered in   %.3f ms\n", lower_s * 1e3);
      std::printf("  measured     %.3f ms (median of %d; %s), the whole call\n", run_s * 1e3, o->repeat,
                  human_count(run_s > 0 ? s.flops / run_s : 0.0, "flop/s").c_str());
      std::printf("  task graph   %.3f ms (%s): first task start to last task end, as compare counts it\n",
                  graph_s * 1e3, human_count(graph_s > 0 ? s.flops / graph_s : 0.0, "flop/s").c_str());
      if (r.unmarked_span_s >= 0)
        std::printf("  unmarked     %.3f ms: the same graph without per-task timing events, one launch timed whole\n",
                    r.unmarked_span_s * 1e3);
      std::printf("  reference    %.3f ms (whole tensors in doubles, large einsums on every core)\n", ref_s * 1e3);
      if (capped) {
        print_memory_cap(*capped);
        const auto peaks = timeline_peak_bytes(tg, r.timeline);
        std::printf("  peak memory   %s on the busiest device (live buffers over the measured timeline)\n",
                    human_bytes(static_cast<double>(peaks.empty() ? 0 : *std::max_element(peaks.begin(), peaks.end()))).c_str());
      }
      for (const auto& c : check)
        std::printf("  output %-6s max |error| %.3g (normwise %.3g, tolerance %.0e): %s\n",
                    c["output"].get<std::string>().c_str(), c["max_abs_error"].get<double>(),
                    c["normwise_rel_error"].get<double>(), c["tolerance"].get<double>(),
                    c["pass"].get<bool>() ? "PASS" : "FAIL");
    }
    if (!ok) fail("run: the result differs from the reference evaluator (", check.dump(), ")");
  });
}

}  // namespace

void add_core_commands(CLI::App& app) {
  add_workloads(app);
  add_lower(app);
  add_einsum(app);
  add_run(app);
}

}  // namespace tessel::cli
