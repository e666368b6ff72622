// tessel plan: choose a decomposition with a planner strategy and report its cost.
#include <chrono>
#include <cstdio>
#include <memory>

#include "core/error.h"
#include "core/io.h"
#include "core/machine.h"
#include "experiments/cli.h"
#include "planner/placement.h"
#include "planner/search.h"
#include "planner/residency.h"
#include "planner/strategy.h"

namespace tessel::cli {
namespace {

using nlohmann::json;

std::string parts_text(const Partition& p) { return p.rank() == 0 ? "scalar" : p.to_string(); }

json search_json(const planner::SearchReport& r, const SearchOptions& o) {
  json moves = json::object();
  for (const auto& [kind, m] : r.moves)
    moves[kind] = {{"tried", m.tried}, {"accepted", m.accepted}, {"improved", m.improved}, {"gain_s", m.gain_s}};
  // Strategy names are values ("split-largest"), so the starts are lists, not objects keyed by them.
  json starts = json::array(), stopped = json::array();
  for (const auto& [strategy, s] : r.starts) starts.push_back({{"strategy", strategy}, {"makespan_s", s}});
  for (const auto& [strategy, s] : r.starts_stopped) stopped.push_back({{"strategy", strategy}, {"stopped_at_s", s}});
  return {{"start_strategy", r.start_strategy}, {"start_makespan_s", r.start_makespan_s},
          {"final_makespan_s", r.final_makespan_s}, {"starts", starts},
          {"starts_stopped", stopped}, {"starts_too_large", r.starts_too_large},
          {"max_tasks", r.max_tasks}, {"simulations", r.evaluations},
          {"simulations_stopped_by_bound", r.stopped_by_bound}, {"simulations_too_large", r.too_large}, {"elapsed_s", r.elapsed_s},
          // null: no clock (--budget-simulations alone)
          {"budget_s", o.budget_s <= 0 && o.budget_simulations > 0 ? json(nullptr) : json(o.effective_budget_s())},
          {"budget_simulations", o.budget_simulations},
          {"seed", o.seed}, {"budget_reached", r.budget_reached}, {"moves", moves}};
}

void print_search_report(const planner::SearchReport& r) {
  std::printf("  search: start %s %s, final %s (%.1f%% faster), %d simulations in %s\n", r.start_strategy.c_str(),
              human_seconds(r.start_makespan_s).c_str(), human_seconds(r.final_makespan_s).c_str(),
              r.start_makespan_s > 0 ? 100 * (1 - r.final_makespan_s / r.start_makespan_s) : 0.0, r.evaluations,
              human_seconds(r.elapsed_s).c_str());
  std::printf("  starts:");
  for (const auto& [s, t] : r.starts) std::printf(" %s %s", s.c_str(), human_seconds(t).c_str());
  for (const auto& [s, t] : r.starts_stopped) std::printf(" %s > %s", s.c_str(), human_seconds(t).c_str());
  for (const std::string& s : r.starts_too_large) std::printf(" %s (over %lld tasks)", s.c_str(), static_cast<long long>(r.max_tasks));
  std::printf("\n  %d of the simulations stopped early: their clock passed what could still be kept\n",
              r.stopped_by_bound);
  for (const auto& [kind, m] : r.moves)
    std::printf("  moves %-8s tried %d, accepted %d, new best %d, took %s off\n", kind.c_str(), m.tried, m.accepted,
                m.improved, human_seconds(m.gain_s).c_str());
}

}  // namespace

void add_plan_commands(CLI::App& app) {
  struct Opts {
    GraphOptions graph;
    int devices = 4;
    int k = 1;
    std::string strategy = "eindecomp";
    std::string placement = "round-robin";
    std::string manual;
    std::string machine;
    std::string dtype = "f32";
    std::string out;
    std::string weights = "resident";
    bool json_out = false;
    SearchOptions search;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("plan", "choose a decomposition with a strategy and report its cost per node");
  o->graph.add(*cmd, "chain");
  cmd->add_option("-d,--devices", o->devices, "devices n")->capture_default_str()->check(device_count());
  cmd->add_option("-k,--blocks-per-device", o->k, "blocks per device k (n·k blocks per node)")
      ->capture_default_str()
      ->check(device_count());
  std::string help = "strategy:";
  for (const auto& s : planner::strategies()) help += "\n  " + s->name() + ": " + s->help();
  cmd->add_option("-s,--strategy", o->strategy, help)->capture_default_str();
  cmd->add_option("--placement", o->placement, "round-robin, greedy (min-max load) or locality (where the operand bytes are, at most ⌈blocks/n⌉ blocks of a node per device; a device left without compute is warned about and listed in --json as idle_devices)")->capture_default_str();
  cmd->add_option("--decomposition", o->manual, "decomposition JSON for -s manual");
  cmd->add_option("-m,--machine", o->machine,
                  "machine preset or JSON: the greedy placement then weighs bytes by its flop/s per byte/s, "
                  "eindecomp weighs moved elements by the links they cross, search simulates on it");
  o->search.add(*cmd);
  cmd->add_option("--dtype", o->dtype, "element type for the machine's peak flop/s")->capture_default_str();
  cmd->add_option("--weights", o->weights,
                  "resident (each weight block, and each fill, present at time zero on every device that reads it: "
                  "replicated or sharded at rest, no move; with -m, checked against each device's memory) or "
                  "fetched (one copy each, moved to its readers every step)")
      ->capture_default_str()
      ->check(CLI::IsMember({"resident", "fetched"}));
  cmd->add_option("-o,--output", o->out, "write the decomposition as JSON (accepted by lower, simulate, run)");
  cmd->add_flag("--json", o->json_out, "machine-readable output");
  cmd->footer(
      "Examples:\n  tessel plan -w llama-block:model=7b -d 8 -s eindecomp\n"
      "  tessel plan -w chain-sum:skewed=1 -d 4 -s exhaustive --json\n"
      "  tessel plan -w llama-block:model=7b,batch=8 -d 8 -s data-parallel --weights fetched\n"
      "  tessel plan -w llama-block:model=65b,batch=4 -d 32 -s dp-tp -m cluster:4xh100-sxm-8\n"
      "  tessel plan -w ffn -d 4 -s megatron --placement greedy -o ffn4.json && tessel simulate -w ffn "
      "--decomposition ffn4.json -m h100-sxm-8");
  cmd->callback([o] {
    // -o checked before a search of up to --budget-s.
    OutputBatch out({{"-g", o->graph.graph_file}, {"-m", o->machine}, {"--manual", o->manual}});
    out.add("-o", o->out);
    Graph g = o->graph.load();
    planner::PlanOptions po;
    po.devices = o->devices;
    po.blocks_per_device = o->k;
    po.placement = o->placement;
    po.manual_file = o->manual;
    po.dtype = parse_dtype(o->dtype, "--dtype");
    po.weights = planner::parse_weights(o->weights);
    if (!o->machine.empty()) po.machine = load_machine(o->machine);
    po.budget_s = o->search.effective_budget_s();
    po.search_evaluations = o->search.budget_simulations;
    po.seed = o->search.seed;
    po.progress = print_search_progress;
    auto t0 = std::chrono::steady_clock::now();
    planner::Plan p = planner::plan(g, o->strategy, po);
    double plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!o->out.empty()) {
      out.stage(o->out, to_json(p.decomposition, g).dump(2) + "\n");
      out.commit();
    }
    warn_idle(p.idle_devices, o->devices, o->strategy);
    if (o->out == "-") return;  // the decomposition went to stdout in place of the report
    const double total = p.total_cost();
    if (o->json_out) {
      json nodes = json::array();
      for (NodeId id : g.ids()) {
        const planner::NodeCost& c = p.costs[id.index()];
        nodes.push_back({{"name", g.node(id).name},
                         {"kind", std::string(to_string(g.node(id).kind))},
                         {"parts", p.decomposition.plan(id).partition.parts()},
                         {"blocks", p.decomposition.plan(id).partition.num_blocks()},
                         {"cost", c.total()},
                         {"join_cost", c.join},
                         {"aggregation_cost", c.aggregation},
                         {"repartition_cost", c.repartition}});
      }
      double join = 0, agg = 0, rep = 0;
      for (const auto& c : p.costs) {
        join += c.join;
        agg += c.aggregation;
        rep += c.repartition;
      }
      json j = {{"graph", o->graph.describe()},
                  {"strategy", o->strategy},
                  {"placement", o->placement},
                  {"devices", o->devices},
                  {"blocks_per_device", o->k},
                  {"weights", o->weights},
                  {"resident_weight_bytes", planner::resident_weight_bytes(g, p.decomposition)},
                  {"idle_devices", p.idle_devices},
                  {"flops_per_byte", planner::flops_per_byte(po)},
                  {"cost", total},
                  {"cost_by_kind", {{"join", join}, {"aggregation", agg}, {"repartition", rep}}},
                  {"plan_wall_s", plan_s},
                  {"nodes", nodes}};
      if (p.search) j["search"] = search_json(*p.search, o->search);
      print_json(j);
      return;
    }
    std::printf("%s: strategy %s, %d devices x %d, placement %s, weights %s, planned in %s\n",
                o->graph.describe().c_str(), o->strategy.c_str(), o->devices, o->k, o->placement.c_str(),
                o->weights.c_str(), human_seconds(plan_s).c_str());
    std::printf("  %-20s %-8s %-14s %7s %14s %7s\n", "node", "kind", "parts", "blocks", "cost (elems)", "share");
    for (NodeId id : g.ids()) {
      const Node& n = g.node(id);
      if (n.kind == NodeKind::input || n.kind == NodeKind::output || n.kind == NodeKind::fill) continue;
      double c = p.costs[id.index()].total();
      std::printf("  %-20s %-8s %-14s %7lld %14.4g %6.1f%%\n", n.name.c_str(), std::string(to_string(n.kind)).c_str(),
                  parts_text(p.decomposition.plan(id).partition).c_str(),
                  static_cast<long long>(p.decomposition.plan(id).partition.num_blocks()), c,
                  total > 0 ? 100 * c / total : 0.0);
    }
    std::printf("  total cost %.6g elements moved or replicated\n", total);
    if (p.search) print_search_report(*p.search);
    if (!o->out.empty()) std::printf("  wrote %s\n", o->out.c_str());
  });
}

}  // namespace tessel::cli
