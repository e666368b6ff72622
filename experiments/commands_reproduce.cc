// tessel reproduce: published experiments rerun in the simulator (experiments/reproduce.h).
#include <cstdio>
#include <memory>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "core/output_files.h"
#include "experiments/cli.h"
#include "experiments/reproduce.h"

#ifndef TESSEL_PLOTS_DIR
#define TESSEL_PLOTS_DIR "plots"
#endif

namespace tessel::cli {

void add_reproduce_commands(CLI::App& app) {
  struct Opts {
    std::string name;
    experiments::ReproduceOptions ro;
    bool list = false;
    bool no_plot = false;
    bool json_out = false;
  };
  auto o = std::make_shared<Opts>();
  o->ro.plots_dir = TESSEL_PLOTS_DIR;
  auto* cmd = app.add_subcommand("reproduce", "rerun a published experiment in the simulator: CSV, PNG, headline numbers");
  cmd->add_option("name", o->name, "reproduction (see --list)");
  cmd->add_option("-o,--output", o->ro.dir, "directory for NAME.csv and NAME*.png")->capture_default_str();
  cmd->add_option("-j,--jobs", o->ro.jobs, "points simulated at once (default: every core)")->check(positive_number());
  cmd->add_flag("--quick", o->ro.quick, "reduced sizes: the same experiment on small graphs, in seconds");
  cmd->add_flag("--no-plot", o->no_plot, "write the CSV only");
  cmd->add_option("--workload", o->ro.workload,
                  "offload only: the workload to cap instead of llama-block:model=7b (e.g. llama-block:model=7b,batch=2; "
                  "same plan, machine and caps)");
  cmd->add_option("--plots-dir", o->ro.plots_dir, "where plots/ lives")->capture_default_str();
  cmd->add_flag("--list", o->list, "list the reproductions");
  cmd->add_flag("--json", o->json_out, "print what was written as JSON");
  cmd->footer(
      "Examples:\n"
      "  tessel reproduce --list\n"
      "  tessel reproduce work-conserving -o out\n"
      "  tessel reproduce scaling --quick -o /tmp/scaling");
  cmd->callback([o] {
    if (o->list || o->name.empty()) {
      for (const auto& r : experiments::reproductions())
        std::printf("  %-18s %s%s\n", r.name.c_str(), r.summary.c_str(),
                    r.implemented ? "" : ("  [" + r.why_not + "]").c_str());
      if (!o->list) throw CLI::ValidationError("reproduce", "give a NAME (listed above)");  // exit 2: the command line
      return;
    }
    experiments::ReproduceOptions ro = o->ro;
    if (ro.jobs <= 0) ro.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    ro.plot = !o->no_plot;
    if (o->json_out) ro.out = stderr;  // keep stdout for the JSON
    // The places written checked before the experiment (minutes, for sim-vs-measured): the
    // folder is made and, if this made it, removed again; the experiment makes it for good.
    {
      OutputBatch probe;
      probe.add_folder("-o", ro.dir);
    }
    if (ro.plot && !std::filesystem::is_regular_file(std::filesystem::path(ro.plots_dir) / "python.sh"))
      fail("--plots-dir ", ro.plots_dir, ": no python.sh there (the plots/ folder of tessel's source; --no-plot writes "
           "the CSV alone)");
    const experiments::ReproduceResult r = experiments::reproduce(o->name, ro);
    if (o->json_out)
      print_json({{"reproduction", o->name},
                  {"csv", r.csv},
                  {"pngs", r.pngs},
                  {"points", r.points},
                  {"failed", r.failed},
                  {"headlines", r.headlines}});
  });
}

}  // namespace tessel::cli
