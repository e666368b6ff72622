// tessel sweep: the cartesian product of a spec's lists, simulated on all cores, one
// CSV row per point (experiments/sweep.h).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <thread>

#include "core/error.h"
#include "core/io.h"
#include "experiments/backend.h"
#include "core/machine.h"
#include "core/output_files.h"
#include "experiments/cli.h"
#include "experiments/overlap_cli.h"
#include "experiments/sweep.h"

namespace tessel::cli {
void add_sweep_commands(CLI::App& app) {
  struct Opts {
    std::string spec;
    std::string out;
    int jobs = 0;
    bool json_out = false;
    OverlapOptions overlap;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("sweep", "simulate the cartesian product of a spec's lists; one CSV row per point");
  cmd->add_option("spec", o->spec, "sweep spec JSON (keys: workloads, devices, strategies, placements, machines, "
                                   "networks, policies, backends, weights, memory_caps, offload_orders; each a list)")
      ->required();
  cmd->add_option("-o,--output", o->out, "results CSV: appended to, resumed if it exists")->required();
  cmd->add_option("-j,--jobs", o->jobs, "points simulated at once (default: every core)")->check(positive_number());
  cmd->add_flag("--json", o->json_out, "print the summary as JSON");
  o->overlap.add(*cmd);
  cmd->footer(
      "A spec is a JSON object of lists; a key left out takes the CLI's default (devices [4],\n"
      "strategies [\"split-largest\"], placements [\"round-robin\"], networks [\"flow\"], policies\n"
      "[\"async\"], backends [\"sim\"], weights [\"resident\"], memory_caps [null], offload_orders\n"
      "[\"free\"]); workloads and machines are required. backend \"cpu\" runs the point on this\n"
      "machine's cores instead (median of 3 after a warm-up, one point at a time).\n\n"
      "memory_caps: caps as --memory-cap takes them (\"0.5\", \"50%\", \"512MiB\"), null for uncapped; a\n"
      "cap the parser refuses stops the sweep before any point runs. A capped point is planned as\n"
      "`simulate --memory-cap` plans it (each prefetch rule, the fastest kept), a cpu one as\n"
      "`run --memory-cap` does (one-range, evicts and loads on the workers); it needs the async\n"
      "policy and no --fuse-collectives, and a cap below what one task needs is an error row.\n"
      "offload_orders: free, fixed (capped points only: the pair null and fixed is not a point, and\n"
      "\"fixed\" with every cap null is refused).\n\n"
      "Columns: workload, devices, strategy, placement, machine, network, policy, backend, weights,\n"
      "memory_cap (as given, empty when uncapped), offload_order, ready_order, comm_priority,\n"
      "comm_sms, comm_mechanism, fuse_collectives (the options as given; \"machine\": the machine's),\n"
      "makespan_s, bytes_moved, peak_memory_bytes, compute_utilization, comm_utilization, tasks (of\n"
      "the graph that ran), events, evicts, loads, bytes_evicted, bytes_loaded, prefetch (the memory\n"
      "plan's; 0 and empty when uncapped), plan_wall_s, lower_wall_s, memory_plan_wall_s, sim_wall_s,\n"
      "fused_kernels, error. Rows follow completion order (sort by the key columns to compare files);\n"
      "every column but the *_wall_s ones is deterministic. A point that fails is recorded with its\n"
      "error and the sweep goes on. Run the same command again to resume: points already in the file\n"
      "(the same key columns, memory_cap and offload_order included) are skipped; a file with other\n"
      "columns is refused. Ctrl-C stops after the points under way; a second ends it at once.\n"
      "--comm-priority, --comm-sms, --comm-mechanism, --ready-order and --fuse-collectives apply to every\n"
      "simulated point and are key columns: a point run with other options is not taken from the file.\n"
      "--fuse-collectives on a point with nothing to fuse warns and runs it unfused (fused_kernels 0).\n\n"
      "Examples:\n"
      "  tessel sweep experiments/specs/scaling.json -o scaling.csv\n"
      "  tessel sweep experiments/specs/strategies.json -o out.csv --jobs 1\n"
      "  tessel sweep experiments/specs/offload.json -o offload.csv\n"
      "  echo '{\"workloads\":[\"chain\"],\"devices\":[2,4],\"machines\":[\"h100-sxm-8\"]}' > s.json && tessel sweep s.json -o s.csv");
  cmd->callback([o] {
    experiments::SweepSpec spec = experiments::parse_sweep_spec(read_json_file(o->spec), o->spec);
    spec.interference = o->overlap.interference();
    spec.ready_order = o->overlap.ready();
    spec.fuse_collectives = o->overlap.fuse_collectives;
    if (spec.interference.any()) {  // a bad --comm-sms fails before any point runs
      for (const auto& name : spec.machines) {
        Machine m = load_machine(name);
        spec.interference.apply(m);
      }
    }
    experiments::SweepOptions so;
    so.jobs = o->jobs > 0 ? o->jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    so.progress_bar = ::isatty(STDERR_FILENO) != 0;
    // mpirun -np R tessel sweep ...: the points spread over the ranks, rank 0 writes.
    if (!sweep_over_ranks(spec, so, o->jobs > 0)) return;
    experiments::SweepSummary s;
    {
      const SigintFlag ctrl_c;  // Ctrl-C stops after the points under way; a second ends it now
      so.stop = [&ctrl_c] { return ctrl_c.interrupted(); };
      s = experiments::run_sweep(spec, o->out, so);
    }
    if (o->json_out) {
      print_json({{"spec", o->spec},
                  {"output", o->out},
                  {"points", s.total},
                  {"skipped", s.skipped},
                  {"done", s.done},
                  {"failed", s.failed},
                  {"interrupted", s.interrupted},
                  {"wall_s", s.wall_s}});
    } else {
      std::printf("%s: %zu points, %zu were already in %s, %zu run now (%zu failed: see the error column) in %.1f s\n",
                  o->spec.c_str(), s.total, s.skipped, o->out.c_str(), s.done, s.failed, s.wall_s);
    }
    if (s.interrupted)
      fail("sweep interrupted: ", s.skipped + s.done, " of ", s.total, " points are in ", o->out,
           "; run the same command again to resume");
  });
}

}  // namespace tessel::cli
