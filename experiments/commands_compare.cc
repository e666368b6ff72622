// tessel calibrate | compare: measure the CPU backend, and lay simulated and measured
// timelines of the same task graphs side by side.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/io.h"
#include "core/machine.h"
#include "core/task_graph.h"
#include "experiments/backend.h"
#include "experiments/cli.h"
#include "experiments/overlap_cli.h"
#include "experiments/memory_cap.h"
#include "experiments/compare.h"
#include "runtime/calibrate.h"
#include "runtime/cpu_executor.h"
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

void print_calibration(const runtime::Calibration& c) {
  std::fprintf(stderr, "  GEMM peak %s per worker, generic %s, memory %s/s, copies %s/s alone, %s/s each when all copy, "
               "%s per task, %s per bsp barrier\n",
               human_count(c.peak_flops_per_s, "flop/s").c_str(), human_count(c.generic_flops_per_s, "flop/s").c_str(),
               human_bytes(c.memory_bytes_per_s).c_str(), human_bytes(c.copy_bytes_per_s_alone).c_str(),
               human_bytes(c.copy_bytes_per_s_shared).c_str(), human_seconds(c.task_overhead_s).c_str(), human_seconds(c.barrier_latency_s).c_str());
  std::fprintf(stderr, "  last-level cache kept %.0f%% of a buffer over a %s idle (a diagnostic of the host: low while "
               "other work shares the cache)\n",
               100 * c.outer_cache_retained_fraction, human_seconds(c.outer_cache_retention_idle_s).c_str());
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
    int gpus = 0;
    std::string out;
    double seconds = 0.05;
    int rounds = 3;
    bool json_out = false;
    bool overlap = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("calibrate", "measure a backend and write a machine JSON the simulator accepts");
  cmd->add_option("--backend", o->backend,
                  "cpu, cuda or mpi (under mpirun: the CPU figures on rank 0 with every device's worker, and the "
                  "point-to-point latency and bandwidth between ranks as the links between their devices)")
      ->capture_default_str();
  cmd->add_option("-d,--devices", o->devices,
                  "workers (cpu, default: every core) or devices (cuda, default 1; more devices than GPUs are virtual "
                  "devices, each described with its GPU's rates and the GPU as its chip, which the simulator shares "
                  "among them; the GPU's dispatch gate and the bsp barrier are measured on them too)")
      ->check(device_count());
  cmd->add_option("--gpus", o->gpus, "--backend cuda: physical GPUs (default: every visible one, at most -d)")
      ->check(non_negative_number());
  cmd->add_option("-o,--output", o->out, "machine JSON to write")->required();
  cmd->add_option("--seconds", o->seconds, "measuring time per point and round")
      ->capture_default_str()
      ->check(positive_number());
  cmd->add_option("--rounds", o->rounds, "rounds over all points; each point keeps its median")
      ->capture_default_str()
      ->check(positive_number());
  cmd->add_flag("--json", o->json_out, "print the measurements as JSON");
  cmd->add_flag("--overlap", o->overlap,
                "--backend cuda: also measure compute/communication overlap (a GEMM stream and a communication stream: "
                "copy engines and SM copy kernels, normal and high priority, with and without SMs reserved) and write "
                "the measured interference rows");
  cmd->footer("Example:\n  tessel calibrate -d 2 -o cpu2.json && tessel simulate -w chain -d 2 -m cpu2.json\n"
              "  tessel calibrate --backend cuda --overlap -o h100.json   (needs a GPU)");
  cmd->callback([o] {
    if (o->overlap && o->backend != "cuda")
      fail("calibrate --overlap: needs --backend cuda (CPU workers run compute and communication on one lane: "
           "nothing overlaps)");
    // Before measuring (seconds on the CPU, minutes on a GPU): an output that cannot be
    // written fails now. Under mpi only rank 0 writes, and other ranks may not see its
    // folder, so the check is left to the write.
    if (o->backend != "mpi") check_can_write(o->out);
    if (o->backend == "cuda") {
      Machine m;
      json j = calibrate_cuda_backend(o->devices > 0 ? o->devices : 1, o->gpus, o->seconds, &m);
      if (o->overlap) j["overlap"] = calibrate_cuda_overlap_backend(o->seconds, &m);
      write_file_atomic(o->out, to_json(m).dump(2) + "\n");
      if (o->out == "-") return;  // the machine went to stdout in place of the report
      if (o->json_out) {
        j["machine_file"] = o->out;
        print_json(j);
      } else {
        std::printf("wrote %s (%d devices)\n", o->out.c_str(), m.num_devices());
      }
      return;
    }
    if (o->backend == "mpi") {
      Machine m;
      json j;
      if (!calibrate_mpi_backend(o->devices, o->seconds, o->rounds, &m, &j)) return;  // not rank 0
      write_file_atomic(o->out, to_json(m).dump(2) + "\n");
      if (o->out == "-") return;
      if (o->json_out) {
        j["machine_file"] = o->out;
        print_json(j);
      } else {
        std::printf("wrote %s (%d devices)\n", o->out.c_str(), m.num_devices());
      }
      return;
    }
    if (o->backend != "cpu") fail("calibrate: unknown backend '", o->backend, "' (expected cpu, cuda or mpi)");
    int devices = o->devices > 0 ? o->devices : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    warn_oversubscribed(devices);
    runtime::Calibration c = run_calibration(devices, o->seconds, o->rounds);
    Machine m = runtime::machine_from_calibration(c);
    write_file_atomic(o->out, to_json(m).dump(2) + "\n");
    if (o->out == "-") return;  // the machine went to stdout in place of the report
    if (o->json_out) {
      json j = runtime::to_json(c);
      j["machine_file"] = o->out;
      print_json(j);
    } else {
      std::printf("wrote %s (%d devices)\n", o->out.c_str(), devices);
    }
  });
}

void add_compare(CLI::App& app) {
  struct Opts {
    GraphOptions graph;
    int devices = 0;
    std::string strategies = "eindecomp,data-parallel,megatron";
    std::string policies = "async,bsp";
    std::string backend = "cpu";
    CudaCliOptions cuda;
    OverlapOptions overlap;
    std::string machine;
    std::string network = "flow";
    std::string weights = "resident";
    int repeat = 5;
    int warmup = 1;
    double calibration_seconds = 0.05;
    std::string compute_model = "profiled";
    double profile_seconds = 0.002;
    bool no_cache_model = false;
    std::string kernel_times = "retained";
    std::string cache_bytes;
    std::uint64_t seed = 1;
    cli::SearchOptions search;
    std::string trace_dir;
    std::string interference_beside;
    std::string memory_cap;
    std::string offload_order = "free";
    std::string copy_lane = "worker";
    bool json_out = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "compare", "plan, simulate and run the same task graphs; lay simulated and measured times side by side");
  o->graph.add(*cmd, "chain:size=512");
  cmd->add_option("-d,--devices", o->devices, "devices (default: the largest power of two <= the cores)")
      ->check(device_count());
  cmd->add_option("-s,--strategy", o->strategies, "comma-separated strategies")->capture_default_str();
  cmd->add_option("--policy", o->policies,
                  "comma-separated policies: async, bsp (with --memory-cap the default is async alone: a capped graph "
                  "cannot run under bsp, and --policy bsp with it is an error)")
      ->capture_default_str();
  cmd->add_option("--backend", o->backend,
                  "cpu, cuda (GPUs: without -m calibrated once before the rounds; kernels profiled on the GPU, hot "
                  "only) or mpi (mpirun -np R tessel compare ... -m MACHINE.json from calibrate --backend mpi; "
                  "analytic compute model)")
      ->capture_default_str();
  o->cuda.add(*cmd);
  o->overlap.add(*cmd, false, false);
  cmd->add_option("-m,--machine", o->machine,
                  "machine JSON from `tessel calibrate` (default: calibrate here, one calibration round before each "
                  "timed round, so that both see the machine at the same moments)");
  cmd->add_option("--network", o->network, "simulator network model: flow or alpha-beta")->capture_default_str();
  cmd->add_option("--weights", o->weights, kWeightsHelp)->capture_default_str()->check(CLI::IsMember({"resident", "fetched"}));
  cmd->add_option("--repeat", o->repeat, "measured runs per row, 1 to 10000; the median is reported")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxRepeat));
  cmd->add_option("--warmup", o->warmup,
                  "untimed runs of a row right before each of its timed runs, so that a timed run finds the caches as "
                  "a repeated step of the same graph leaves them (not as the calibration or another row did)")
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxRepeat));
  cmd->add_option("--calibration-seconds", o->calibration_seconds,
                  "without -m: measuring time of each calibration point per round")
      ->capture_default_str()
      ->check(positive_number());
  cmd->add_option("--compute-model", o->compute_model,
                  "how the simulation times compute tasks: 'profiled' (cpu: after each timed run every compute task is "
                  "timed again in place, on that run's own buffers, with all workers busy; cuda: every distinct kernel "
                  "is timed on the GPU before each round's runs of its strategy; that round's times plus the per-task "
                  "overhead replace the roofline in that round's simulation — on the cpu between a task's hot and cold "
                  "times by how much of its data the simulated worker's cache holds; the analytic simulation is "
                  "reported beside it) or 'analytic' (the machine's roofline and efficiency table only)")
      ->capture_default_str()
      ->check(CLI::IsMember({"profiled", "analytic"}));
  cmd->add_option("--profile-seconds", o->profile_seconds,
                  "with --compute-model profiled: measuring time of each kernel (cpu: each compute task) per round")
      ->capture_default_str()
      ->check(positive_number());
  cmd->add_option("--kernel-times", o->kernel_times,
                  "with --compute-model profiled on the CPU, the profiled time each compute task takes in the "
                  "simulation: retained (between its cold call and its call with its operands flushed to DRAM, by "
                  "how much of a buffer the last-level cache kept in that round's calibration, so that a host whose "
                  "other tenants share that cache is timed as it is; the cold simulation is reported beside it; "
                  "needs compare's own calibration: with -m the default is cold), cold (its call right after the "
                  "worker's per-core cache was overwritten; inside a task graph this CPU's kernels run near it), "
                  "cached (between hot and cold by how much of its data the simulated worker's cache still holds, "
                  "--cache-bytes) or hot (its kernel called in a loop); the hot simulation is reported beside the "
                  "others (GPU kernels: hot)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cold", "cached", "hot", "retained"}));
  cmd->add_flag("--no-cache-model", o->no_cache_model, "deprecated: use --kernel-times hot");
  cmd->add_option("--cache-bytes", o->cache_bytes,
                  "the cache model's (--kernel-times cached, which it implies): the bytes each simulated worker's cache holds (4096, 512KiB, 1MiB; "
                  "default: the machine's cache_capacity_bytes, this CPU's per-core cache); the machine's roofline "
                  "keeps its own")
      ->check([](const std::string& value) {
        try {
          (void)parse_bytes(value);
          return std::string();
        } catch (const Error&) {
          return "'" + value + "': expected a whole number of bytes >= 1 (4096, 512KiB, 1MiB)";  // CLI11 names the option
        }
      });
  cmd->add_option("--seed", o->seed, "seed of the random inputs and of -s search")->capture_default_str();
  o->search.add(*cmd, /*with_seed=*/false);  // --budget-s, --budget-simulations (-s search needs -m)
  cmd->add_option("--trace-dir", o->trace_dir, "write every simulated and measured timeline (Chrome trace) here");
  cmd->add_option("--interference-beside", o->interference_beside,
                  "also simulate each round with the machine's interference rows replaced, against the same measured "
                  "runs: published (the published defaults; the priority, reserved SMs and mechanism kept) or none "
                  "(no slowdown while compute and communication overlap); JSON simulated_interference_beside_s, "
                  "error_interference_beside_pct, mape_interference_beside_pct: what measured rows (calibrate "
                  "--overlap) gain over the defaults, in one run")
      ->check(CLI::IsMember({"published", "none"}));
  add_memory_cap_option(*cmd, o->memory_cap,
                        ". Planned once, with the one-range prefetch rule (simulate plans with each rule and keeps "
                        "the fastest by simulation); without --policy, async alone is compared");
  add_offload_order_option(*cmd, o->offload_order, "; both the runs and their simulations take the fixed graph");
  add_copy_lane_option(*cmd, o->copy_lane,
                       "; simulated alike on a calibrated machine (host_copy_lane), as if each copy lane had a core of "
                       "its own and without the memory bandwidth it shares with its worker; a -m machine that is not "
                       "single-lane (every preset) simulates evicts and loads beside compute either way (warned)");
  cmd->add_flag("--json", o->json_out, "machine-readable output");
  cmd->footer(
      "Examples:\n  tessel compare                      (the X·Y·Z chain on the cores, 3 strategies, async against bsp)\n"
      "  tessel calibrate -d 2 -o cpu2.json && tessel compare -w ffn -d 2 -m cpu2.json --json\n"
      "  tessel compare -w llama-block:model=tiny -d 2 --memory-cap 50%   (async only)\n"
      "  tessel compare -w llama-block:model=tiny -d 2 --policy async --memory-cap 50% --offload-order fixed\n"
      "  tessel compare -w llama-block:model=tiny -d 1 --policy async --memory-cap 50% --copy-lane thread");
  cmd->callback([o, cmd] {
    const bool cuda = o->backend == "cuda";
    Graph g = o->graph.load();
    experiments::CompareOptions co;
    co.devices = o->devices;
    co.backend = o->backend;
    co.cuda = o->cuda;
    if (co.devices <= 0 && cuda) co.devices = 4;  // virtual devices where there are fewer GPUs
    if (co.devices <= 0) {  // EinDecomp's candidates need a power of two
      co.devices = 1;
      while (co.devices * 2 <= static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) co.devices *= 2;
    }
    co.strategies = split_list(o->strategies, "--strategy");
    co.policies = split_list(o->policies, "--policy");
    co.policies_given = cmd->count("--policy") > 0;
    if (!o->machine.empty()) {
      co.machine = load_machine(o->machine);
      co.machine_name = o->machine;
    }
    co.network = o->network;
    co.weights = o->weights;
    co.repeat = o->repeat;
    co.warmup = o->warmup;
    co.calibration_seconds = o->calibration_seconds;
    co.profiled = o->compute_model == "profiled";
    co.profile_seconds = o->profile_seconds;
    co.kernel_times = experiments::parse_kernel_times(o->kernel_times, "--kernel-times");
    co.kernel_times_given = cmd->count("--kernel-times") > 0;
    if (o->no_cache_model) {
      if (cmd->count("--kernel-times") > 0 && co.kernel_times != experiments::KernelTimes::hot)
        fail("--no-cache-model and --kernel-times ", o->kernel_times,
             " disagree (--no-cache-model is the deprecated name of --kernel-times hot)");
      std::fprintf(stderr, "tessel: warning: --no-cache-model is deprecated and will be removed: use --kernel-times hot\n");
      co.kernel_times = experiments::KernelTimes::hot;
    } else if (!o->cache_bytes.empty() && cmd->count("--kernel-times") == 0) {
      co.kernel_times = experiments::KernelTimes::cached;  // the cache model is what --cache-bytes sizes
    }
    if (!o->cache_bytes.empty()) co.cache_bytes = parse_bytes(o->cache_bytes);
    co.seed = o->seed;
    co.search = o->search;
    co.trace_dir = o->trace_dir;
    co.interference_beside = o->interference_beside;
    // --comm-priority sets the CUDA comm stream's priority and the simulated one alike.
    OverlapOptions ov = o->overlap;
    ov.comm_priority = o->cuda.comm_priority;
    co.interference = ov.interference();
    co.ready_order = ov.ready();
    if (co.machine) {
      ov.apply(*co.machine);  // a bad --comm-sms fails before any run
    } else if (!cuda && ov.comm_sms > 0) {
      fail("--comm-sms ", ov.comm_sms, ": the CPU backend's calibrated machine has no SMs to reserve");
    }
    co.memory_cap = o->memory_cap;
    co.offload_order = parse_offload_order(o->offload_order);
    co.copy_lane = runtime::parse_copy_lane(o->copy_lane, "--copy-lane");
    const experiments::CompareResult res = experiments::run_compare(g, o->graph.describe(), co);
    if (mpi_rank_and_size().first != 0) return;  // --backend mpi: rank 0 reports
    if (o->json_out)
      print_json(experiments::compare_to_json(res));
    else
      experiments::print_compare(res);
    if (!res.correct) fail("compare: a run's result differs from the reference evaluator (see the check column)");
  });
}

}  // namespace

void add_compare_commands(CLI::App& app) {
  add_calibrate(app);
  add_compare(app);
}

}  // namespace tessel::cli
