// tessel export: a workload as graph JSON, its lowered decomposition as task-graph JSON
// and as a Chakra execution trace (one .et file per device).
#include <cstdio>
#include <memory>

#include "core/error.h"
#include "core/io.h"
#include "core/machine.h"
#include "core/task_graph.h"
#include "experiments/chakra.h"
#include "experiments/cli.h"
#include "sim/collectives.h"
#include "sim/task_graph_json.h"

namespace tessel::cli {

void add_export_commands(CLI::App& app) {
  struct Opts {
    GraphOptions graph;
    DecompositionOptions dec;
    std::string graph_out, task_graph_out, chakra_dir, machine;
    bool json_out = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("export", "write a graph, its task graph or a Chakra execution trace for other tools");
  o->graph.add(*cmd);
  o->dec.add(*cmd);
  cmd->add_option("--graph-out", o->graph_out, "write the graph as JSON (`-g FILE` reads it back)");
  cmd->add_option("--task-graph", o->task_graph_out,
                  "write the lowered task graph as JSON (`simulate --task-graph FILE` reads it back)");
  cmd->add_option("--chakra", o->chakra_dir,
                  "write a Chakra execution trace (schema 0.0.4) into DIR: tessel.<device>.et per device");
  cmd->add_option("-m,--machine", o->machine,
                  "machine preset or JSON whose compute model gives the Chakra compute durations")
      ->capture_default_str();
  cmd->add_flag("--json", o->json_out, "print what was written as JSON");
  cmd->footer(
      "The graph option is --graph-out because -g/--graph names the graph to read.\n\n"
      "Examples:\n"
      "  tessel export -w ffn --graph-out ffn.json && tessel lower -g ffn.json -d 4\n"
      "  tessel export -w chain -d 8 -s eindecomp --task-graph tg.json && tessel simulate --task-graph tg.json -m h100-sxm-8\n"
      "  tessel export -w llama-block:model=7b -d 8 -s megatron -m h100-sxm-8 --chakra et/");
  cmd->callback([o] {
    if (o->graph_out.empty() && o->task_graph_out.empty() && o->chakra_dir.empty())
      fail("export: nothing to write: give --graph-out FILE, --task-graph FILE and/or --chakra DIR");
    if (!o->chakra_dir.empty() && o->machine.empty())
      fail("export --chakra needs -m MACHINE (its compute model times the compute nodes)");
    if (!o->chakra_dir.empty() && !experiments::chakra_available())
      fail("export --chakra: this build has no protobuf (scripts/install-deps.sh installs libprotobuf-dev and "
           "protobuf-compiler; configure again)");
    // Every output checked before the work, and written together after it (or none).
    OutputBatch out({{"-g", o->graph.graph_file}, {"--decomposition", o->dec.decomposition_file}, {"-m", o->machine}});
    if (!o->chakra_dir.empty()) out.add_folder("--chakra", o->chakra_dir);  // first: a file may go inside it
    out.add("--graph-out", o->graph_out);
    out.add("--task-graph", o->task_graph_out);
    const Graph g = o->graph.load();
    nlohmann::json report = {{"graph", o->graph.describe()}};
    std::string graph_text, task_graph_text;
    TaskGraph tg;
    // A decomposition given is checked even when only the graph is written.
    const bool lowered = !o->task_graph_out.empty() || !o->chakra_dir.empty() || !o->dec.strategy.empty() ||
                         !o->dec.parts.empty() || !o->dec.decomposition_file.empty();
    Machine m;
    if (!o->machine.empty()) m = load_machine(o->machine);  // also the planner's (eindecomp, search)
    if (lowered) tg = lower(g, o->dec.load(g, o->machine.empty() ? nullptr : &m), o->dec.lower_options());
    if (!o->graph_out.empty()) graph_text = to_json(g).dump(2) + "\n";
    // Collective nodes (--collectives nodes) go to JSON as the ring the simulator expands them to.
    if (!o->task_graph_out.empty()) task_graph_text = sim::to_json(sim::expand_collectives(tg)).dump() + "\n";
    if (!o->graph_out.empty()) {
      out.stage(o->graph_out, graph_text);
      report["graph_file"] = o->graph_out;
    }
    if (!o->task_graph_out.empty()) {
      out.stage(o->task_graph_out, task_graph_text);
      report["task_graph_file"] = o->task_graph_out;
    }
    if (lowered) {
      report["tasks"] = tg.size();
      report["devices"] = tg.num_devices;
    }
    if (!o->chakra_dir.empty()) {
      report["chakra_files"] = experiments::stage_chakra(tg, g, m, o->chakra_dir, out);
      report["machine"] = m.name;
    }
    out.commit();
    if (o->json_out) {
      print_json(report);
      return;
    }
    if (report.contains("graph_file")) std::printf("graph       %s\n", o->graph_out.c_str());
    if (report.contains("task_graph_file"))
      std::printf("task graph  %s (%s)\n", o->task_graph_out.c_str(), task_counts(tg).c_str());
    if (report.contains("chakra_files"))
      std::printf("chakra      %zu files in %s (schema 0.0.4, compute durations from %s)\n",
                  report["chakra_files"].size(), o->chakra_dir.c_str(), m.name.c_str());
  });
}

}  // namespace tessel::cli
