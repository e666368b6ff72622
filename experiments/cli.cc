#include "experiments/cli.h"

#include <cmath>
#include <cstdlib>

#include <charconv>
#include <algorithm>
#include <cstdio>
#include <thread>
#include <iostream>

#include <unistd.h>

#include "core/error.h"
#include "core/io.h"
#include "core/workloads.h"
#include "planner/strategy.h"
#include "runtime/executor.h"

namespace tessel::cli {

CLI::Validator device_count() { return CLI::Range(1, kMaxDevices); }

namespace {

// CLI11's own PositiveNumber names the range it checks as "0.000000 to 1.797...e308"
// (some 300 digits); these say what is wanted.
CLI::Validator sign_check(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const char* want = zero_allowed ? "a number >= 0" : "a positive number";
        if (end == text.c_str() || *end != '\0' || !std::isfinite(v))
          return "'" + text + "' is not a finite number (want " + want + ")";
        if (zero_allowed ? v < 0 : v <= 0) return text + " is not " + want;
        return {};
      },
      zero_allowed ? "NONNEGATIVE" : "POSITIVE");
}

}  // namespace

CLI::Validator positive_number() { return sign_check(false); }
CLI::Validator non_negative_number() { return sign_check(true); }

void GraphOptions::add(CLI::App& app, const std::string& default_workload) {
  workload = default_workload;
  auto* w = app.add_option("-w,--workload", workload,
                           "built-in workload NAME[:key=value,...] (see `tessel workloads`)");
  if (!default_workload.empty()) w->capture_default_str();
  app.add_option("-g,--graph", graph_file, "graph JSON file (instead of -w)");
}

Graph GraphOptions::load() const {
  if (!graph_file.empty()) return graph_from_json(read_json_file(graph_file), graph_file);
  if (workload.empty()) fail("no graph: give -w WORKLOAD or -g GRAPH.json");
  return build_workload(workload);
}

std::string GraphOptions::describe() const { return graph_file.empty() ? workload : graph_file; }

void DecompositionOptions::add(CLI::App& app, bool with_devices) {
  if (with_devices)
    app.add_option("-d,--devices", devices, "number of devices")->capture_default_str()->check(device_count());
  app.add_option("-s,--strategy", strategy, "planner strategy (see `tessel plan --help`): eindecomp, megatron, ...");
  app.add_option("--parts", parts,
                 "blocks per node: N (split every node N ways, largest index first) and/or "
                 "NODE=AxBxC,... (parts per join index of NODE)");
  app.add_option("--decomposition", decomposition_file, "decomposition JSON file (partitions and devices)");
  app.add_option("--weights", weights, kWeightsHelp)->capture_default_str()->check(CLI::IsMember({"resident", "fetched"}));
  app.add_option("--collectives", collectives,
                 "moves (every aggregation and repartition as moves and touches) or nodes (an aggregation that is a "
                 "reduce-scatter, and a repartition that is an all-gather, as one collective node each: simulated as "
                 "NCCL's rings, run by the CPU backend as one primitive, by MPI and CUDA as moves)")
      ->capture_default_str()
      ->check(CLI::IsMember({"moves", "nodes"}));
  search.add(app);
}

void SearchOptions::add(CLI::App& app, bool with_seed) {
  app.add_option("--budget-s", budget_s,
                 "-s search: wall-clock budget in seconds (default 30; none with --budget-simulations). A search the "
                 "clock stops depends on how far it got (eindecomp's refinement of its start included): JSON "
                 "search.budget_reached")
      ->check(positive_number())  // NaN passes CLI::Range, whose comparisons it fails
      ->check(CLI::Range(1e-3, 1e6));
  app.add_option("--budget-simulations", budget_simulations,
                 "-s search: stop after N simulations, the starts' included (every start is simulated): the same "
                 "--seed and N give the same plan, bit for bit, on any machine (without --budget-s no clock applies)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  if (with_seed)
    app.add_option("--seed", seed,
                   "random seed of -s search (same seed and --budget-simulations: same plan); `run`: also of the "
                   "random inputs")
      ->capture_default_str();
}

std::string DecompositionOptions::weights_used() const { return strategy.empty() ? "as given" : weights; }

Decomposition DecompositionOptions::load(const Graph& g, const Machine* machine) const {
  if (static_cast<int>(!strategy.empty()) + static_cast<int>(!parts.empty()) +
          static_cast<int>(!decomposition_file.empty()) > 1)
    fail("give one of -s/--strategy, --parts and --decomposition");
  if (!strategy.empty()) return decompose(g, strategy, devices, weights, machine, search);
  if (!decomposition_file.empty()) {
    Decomposition d = decomposition_from_json(read_json_file(decomposition_file), g, decomposition_file);
    return d;
  }
  if (!parts.empty()) return decomposition_from_parts_spec(g, devices, parts);
  return split_largest(g, devices);
}

Decomposition decomposition_from_parts_spec(const Graph& g, int devices, const std::string& spec) {
  std::vector<std::vector<int>> parts(g.size());
  std::size_t pos = 0;
  int uniform = 0;
  while (pos <= spec.size()) {
    std::size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    if (item.empty()) continue;
    std::size_t eq = item.find('=');
    auto parse_int = [&](const std::string& s) {
      int v = 0;
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec != std::errc() || end != s.data() + s.size() || v < 1)
        fail("--parts '", spec, "': '", s, "' is not a positive integer");
      return v;
    };
    if (eq == std::string::npos) {
      uniform = parse_int(item);
      continue;
    }
    std::string name = item.substr(0, eq);
    auto id = g.find(name);
    if (!id) fail("--parts '", spec, "': the graph has no node named '", name, "'");
    std::vector<int> p;
    std::string dims = item.substr(eq + 1);
    std::size_t q = 0;
    while (q <= dims.size()) {
      std::size_t x = dims.find('x', q);
      p.push_back(parse_int(dims.substr(q, x == std::string::npos ? std::string::npos : x - q)));
      q = x == std::string::npos ? dims.size() + 1 : x + 1;
    }
    Shape js = g.join_shape(*id);
    if (p.size() != js.size())
      fail("--parts '", spec, "': node '", name, "' has join shape ", to_string(js), " (", js.size(), " indices) but ",
           p.size(), " part counts were given");
    parts[id->index()] = p;
  }
  for (NodeId id : g.ids())
    if (parts[id.index()].empty() && uniform > 0) parts[id.index()] = split_largest_parts(g.join_shape(id), uniform);
  return decomposition_from_parts(g, devices, parts);
}

void print_json(const nlohmann::json& j) { std::cout << j.dump(2) << '\n'; }

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024 && u < 5) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", b, units[u]);
  return buf;
}

std::string human_count(double v, const char* unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  while (v >= 1000 && p < 5) {
    v /= 1000;
    ++p;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g %s%s", v, prefixes[p], unit);
  return buf;
}

std::string human_seconds(double s) {
  char buf[32];
  if (s >= 1) {
    std::snprintf(buf, sizeof buf, "%.4g s", s);
  } else if (s >= 1e-3) {
    std::snprintf(buf, sizeof buf, "%.4g ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g us", s * 1e6);
  }
  return buf;
}

std::string task_counts(const TaskGraph& tg) {
  auto s = tg.summary();
  std::string out = std::to_string(s.tasks) + " (";
  for (int k = 0; k < kNumTaskKinds; ++k) {
    const auto kind = static_cast<TaskKind>(k);
    if ((kind == TaskKind::evict || kind == TaskKind::load || kind == TaskKind::collective) && s.count[k] == 0) continue;  // memory-planned graphs only
    out += (k ? ", " : "") + std::string(to_string(kind)) + " " + std::to_string(s.count[k]);
  }
  return out + ")";
}

nlohmann::json check_outputs(const Graph& g, const std::map<std::string, Tensor>& got,
                             const std::map<std::string, Tensor>& want, bool* ok, std::string_view backend) {
  auto tolerance = [&](DType t) { return runtime::output_tolerance(t, backend); };
  nlohmann::json out = nlohmann::json::array();
  *ok = true;
  for (NodeId id : g.outputs()) {
    const Node& n = g.node(id);
    Difference d = compare(got.at(n.name), want.at(n.name));
    bool pass = d.normwise_rel <= tolerance(n.dtype);
    *ok = *ok && pass;
    out.push_back({{"output", n.name}, {"max_abs_error", d.max_abs}, {"max_rel_error", d.max_rel},
                   {"normwise_rel_error", d.normwise_rel}, {"worst_index", d.index},
                   {"tolerance", tolerance(n.dtype)}, {"pass", pass}});
  }
  return out;
}

void warn_oversubscribed(int devices) {
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (static_cast<unsigned>(devices) > cores)
    std::fprintf(stderr, "tessel: warning: %d devices on %u cores: timings will be oversubscribed\n", devices, cores);
}

Decomposition decompose(const Graph& g, const std::string& strategy, int devices, const std::string& weights,
                        const Machine* machine, const SearchOptions& search) {
  planner::PlanOptions o;
  o.devices = devices;
  o.weights = planner::parse_weights(weights);
  if (machine && machine->num_devices() >= devices) o.machine = *machine;
  o.budget_s = search.effective_budget_s();
  o.search_evaluations = search.budget_simulations;
  o.seed = search.seed;
  o.progress = print_search_progress;
  planner::Plan p = planner::plan(g, strategy, o);
  warn_idle(p.idle_devices, devices, strategy);
  return std::move(p.decomposition);
}

std::string device_ranges(const std::vector<int>& devices) {
  std::string out;
  for (std::size_t i = 0; i < devices.size();) {
    std::size_t j = i;
    while (j + 1 < devices.size() && devices[j + 1] == devices[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(devices[i]) + (j > i ? "-" + std::to_string(devices[j]) : "");
    i = j + 1;
  }
  return out;
}

void warn_idle(const std::vector<int>& idle, int devices, const std::string& strategy) {
  if (idle.empty()) return;
  std::fprintf(stderr, "tessel: warning: strategy %s leaves %zu of %d devices without compute: %s\n", strategy.c_str(),
               idle.size(), devices, device_ranges(idle).c_str());
}

void print_search_progress(const std::string& line) {
  static const bool tty = isatty(fileno(stderr)) != 0;
  const bool last = line.rfind("search: done", 0) == 0;
  if (tty)
    std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), last ? "\n" : "");
  else
    std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace tessel::cli
