#include "experiments/sweep.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/machine.h"
#include "core/memory_plan.h"
#include "core/workloads.h"
#include "planner/placement.h"
#include "planner/strategy.h"
#include "sim/network.h"
#include "sim/simulator.h"

namespace tessel::experiments {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::vector<std::string> string_list(const json& j, const std::string& key, const std::string& what) {
  if (!j.is_array() || j.empty()) fail(what, ": \"", key, "\" must be a non-empty list of strings");
  std::vector<std::string> out;
  for (const auto& v : j) {
    if (!v.is_string()) fail(what, ": \"", key, "\" must be a list of strings, got ", v.dump());
    out.push_back(v.get<std::string>());
  }
  return out;
}

// "memory_caps": strings as --memory-cap takes them, or null (uncapped, kept as "").
std::vector<std::string> memory_cap_list(const json& j, const std::string& what) {
  if (!j.is_array() || j.empty())
    fail(what, ": \"memory_caps\" must be a non-empty list of caps (\"0.5\", \"50%\", \"512MiB\") or null");
  std::vector<std::string> out;
  for (const auto& v : j) {
    if (v.is_null()) {
      out.emplace_back();
      continue;
    }
    if (!v.is_string())
      fail(what, ": \"memory_caps\": ", v.dump(), " is not a cap: give a string as --memory-cap takes it (\"0.5\", "
           "\"50%\", \"512MiB\") or null for uncapped");
    (void)parse_memory_cap(v.get<std::string>(), what + ": \"memory_caps\"");
    out.push_back(v.get<std::string>());
  }
  return out;
}

void check_member(const std::vector<std::string>& values, const std::vector<std::string>& known, const char* key,
                  const char* kind, const std::string& what) {
  for (const auto& v : values)
    if (std::find(known.begin(), known.end(), v) == known.end())
      fail(what, ": \"", key, "\": unknown ", kind, " '", v, "' (valid: ", join(known), ")");
}

std::string number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

std::string key_of(const std::vector<std::string>& fields) {
  std::string k;
  for (std::size_t i = 0; i < sweep_keys().size() && i < fields.size(); ++i) k += fields[i] + '\x1f';
  return k;
}

std::string human_duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  return buf;
}

}  // namespace

const std::vector<std::string>& sweep_keys() {
  static const std::vector<std::string> keys{"workload",      "devices",       "strategy",     "placement",
                                             "machine",       "network",       "policy",       "backend",
                                             "weights",       "memory_cap",    "offload_order", "ready_order",
                                             "comm_priority", "comm_sms",      "comm_mechanism", "fuse_collectives"};
  return keys;
}

const std::vector<std::string>& sweep_columns() {
  static const std::vector<std::string> cols = [] {
    std::vector<std::string> c = sweep_keys();
    for (const char* f : {"makespan_s", "bytes_moved", "peak_memory_bytes", "compute_utilization", "comm_utilization",
                          "tasks", "events", "evicts", "loads", "bytes_evicted", "bytes_loaded", "prefetch",
                          "plan_wall_s", "lower_wall_s", "memory_plan_wall_s", "sim_wall_s", "fused_kernels", "error"})
      c.emplace_back(f);
    return c;
  }();
  return cols;
}

std::vector<std::string> SweepPoint::key() const {
  // The overlap options as given ("machine": the machine's own setting), so that a file
  // begun with other options is not resumed as if its rows were these.
  const InterferenceSettings& s = interference;
  return {workload,
          std::to_string(devices),
          strategy,
          placement,
          machine,
          network,
          policy,
          backend,
          weights,
          memory_cap,
          offload_order,
          std::string(sim::to_string(ready_order)),
          s.set_priority ? std::string(to_string(s.comm_priority)) : "machine",
          s.set_sms ? std::to_string(s.comm_sms) : "machine",
          s.set_mechanism ? std::string(to_string(s.comm_mechanism)) : "machine",
          fuse_collectives ? "1" : "0"};
}

SweepSpec parse_sweep_spec(const json& j, const std::string& what) {
  if (!j.is_object()) fail(what, ": a sweep spec must be a JSON object of lists");
  static const std::vector<std::string> spec_keys{"workloads", "devices",  "strategies", "placements",  "machines",
                                                  "networks",  "policies", "backends",   "weights",     "memory_caps",
                                                  "offload_orders"};
  for (const auto& [k, v] : j.items())
    if (std::find(spec_keys.begin(), spec_keys.end(), k) == spec_keys.end())
      fail(what, ": unknown key \"", k, "\" (valid: ", join(spec_keys), ")");
  SweepSpec s;
  if (!j.contains("workloads")) fail(what, ": \"workloads\" is required (a list of -w strings, e.g. [\"chain:size=512\"])");
  if (!j.contains("machines"))
    fail(what, ": \"machines\" is required (presets or machine JSON files; presets: ", join(machine_preset_names()), ")");
  s.workloads = string_list(j["workloads"], "workloads", what);
  for (const auto& w : s.workloads) {
    try {
      (void)build_workload(w);
    } catch (const Error& e) {
      fail(what, ": \"workloads\": ", e.what());
    }
  }
  if (j.contains("devices")) {
    const json& d = j["devices"];
    if (!d.is_array() || d.empty()) fail(what, ": \"devices\" must be a non-empty list of positive integers");
    s.devices.clear();
    for (const auto& v : d) {
      if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > (1 << 24))
        fail(what, ": \"devices\": ", v.dump(), " is not a positive integer");
      s.devices.push_back(v.get<int>());
    }
  }
  if (j.contains("strategies")) s.strategies = string_list(j["strategies"], "strategies", what);
  check_member(s.strategies, planner::strategy_names(), "strategies", "strategy", what);
  if (j.contains("placements")) s.placements = string_list(j["placements"], "placements", what);
  check_member(s.placements, planner::placement_names(), "placements", "placement", what);
  s.machines = string_list(j["machines"], "machines", what);
  for (const auto& m : s.machines) {
    try {
      (void)load_machine(m);
    } catch (const Error& e) {
      fail(what, ": \"machines\": ", e.what());
    }
  }
  if (j.contains("networks")) s.networks = string_list(j["networks"], "networks", what);
  std::vector<std::string> nets;
  for (const auto& n : sim::network_models()) nets.push_back(n.name);
  check_member(s.networks, nets, "networks", "network model", what);
  if (j.contains("policies")) s.policies = string_list(j["policies"], "policies", what);
  check_member(s.policies, {"async", "bsp"}, "policies", "policy", what);
  if (j.contains("backends")) s.backends = string_list(j["backends"], "backends", what);
  check_member(s.backends, {"sim", "cpu"}, "backends", "backend", what);
  if (j.contains("weights")) s.weights = string_list(j["weights"], "weights", what);
  check_member(s.weights, {"resident", "fetched"}, "weights", "weights setting", what);
  if (j.contains("memory_caps")) s.memory_caps = memory_cap_list(j["memory_caps"], what);
  if (j.contains("offload_orders")) s.offload_orders = string_list(j["offload_orders"], "offload_orders", what);
  check_member(s.offload_orders, {"free", "fixed"}, "offload_orders", "offload order", what);
  const bool any_cap = std::any_of(s.memory_caps.begin(), s.memory_caps.end(), [](const auto& c) { return !c.empty(); });
  if (!any_cap && std::find(s.offload_orders.begin(), s.offload_orders.end(), "fixed") != s.offload_orders.end())
    fail(what, ": \"offload_orders\": \"fixed\" needs a memory cap, but every entry of \"memory_caps\" is null "
         "(uncapped): there are no evicts or loads to put in a fixed order");
  return s;
}

std::vector<SweepPoint> sweep_points(const SweepSpec& s) {
  std::vector<SweepPoint> out;
  for (const auto& w : s.workloads)
    for (int d : s.devices)
      for (const auto& st : s.strategies)
        for (const auto& pl : s.placements)
          for (const auto& m : s.machines)
            for (const auto& n : s.networks)
              for (const auto& po : s.policies)
                for (const auto& b : s.backends)
                  for (const auto& wt : s.weights)
                    for (const auto& cap : s.memory_caps)
                      for (const auto& order : s.offload_orders) {
                        if (cap.empty() && order == "fixed") continue;  // an uncapped point runs as planned
                        out.push_back({w, d, st, pl, m, n, po, b, wt, cap, order, s.interference, s.ready_order,
                                       s.fuse_collectives});
                      }
  return out;
}

std::vector<std::string> csv_row(const SweepPoint& p, const SweepOutcome& o) {
  std::vector<std::string> row = p.key();
  if (!o.error.empty()) {
    for (std::size_t i = sweep_keys().size(); i + 1 < sweep_columns().size(); ++i) row.emplace_back();
    row.push_back(o.error);
    return row;
  }
  for (const std::string& v :
       {number(o.makespan_s), std::to_string(o.bytes_moved), std::to_string(o.peak_memory_bytes),
        number(o.compute_utilization), number(o.comm_utilization), std::to_string(o.tasks), std::to_string(o.events),
        std::to_string(o.evicts), std::to_string(o.loads), std::to_string(o.bytes_evicted), std::to_string(o.bytes_loaded),
        o.prefetch, number(o.plan_wall_s), number(o.lower_wall_s), number(o.memory_plan_wall_s), number(o.sim_wall_s),
        std::to_string(o.fused_kernels), std::string()})
    row.push_back(v);
  return row;
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    const std::string& f = fields[i];
    if (f.find_first_of(",\"\n\r") == std::string::npos) {
      out += f;
      continue;
    }
    out += '"';
    for (char c : f) {
      if (c == '"') out += '"';
      out += c == '\n' || c == '\r' ? ' ' : c;  // one row per line, whatever an error message holds
    }
    out += '"';
  }
  return out + '\n';
}

std::vector<std::string> parse_csv_line(const std::string& line, const std::string& what) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\n' && c != '\r') {
      out.back() += c;
    }
  }
  if (quoted) fail(what, ": unterminated quote in line '", line, "'");
  return out;
}

SweepSummary run_sweep(const SweepSpec& spec, const std::string& path, const SweepOptions& options) {
  const auto t_start = Clock::now();
  const std::vector<SweepPoint> points = sweep_points(spec);
  SweepSummary summary;
  summary.total = points.size();
  const std::string header = csv_line(sweep_columns());

  // What the file already holds.
  std::set<std::string> done_keys;
  bool write_header = true;
  if (std::filesystem::exists(path)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("sweep: cannot read '", path, "'");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    if (!text.empty()) {
      const std::size_t eol = text.find('\n');
      const std::string first = text.substr(0, eol == std::string::npos ? text.size() : eol + 1);
      if (first != header) {
        std::string got = first;
        while (!got.empty() && (got.back() == '\n' || got.back() == '\r')) got.pop_back();
        fail("sweep: '", path, "' has other columns than this sweep writes; refusing to touch it (give another -o)\n",
             "  file:  ", got, "\n  sweep: ", header.substr(0, header.size() - 1));
      }
      write_header = false;
      // Every complete row read (and checked: a row of another width is refused before
      // the file is touched); a row cut short by a sweep killed mid-write is dropped and
      // its point runs again.
      const std::size_t last = text.find_last_of('\n');
      std::istringstream lines(text.substr(eol + 1, last - eol));
      std::string line;
      for (std::size_t number = 2; std::getline(lines, line); ++number) {
        if (line.empty()) continue;
        const std::vector<std::string> row = parse_csv_line(line, path);
        if (row.size() != sweep_columns().size())
          fail("sweep: '", path, "' line ", number, " has ", row.size(), " fields where its header has ",
               sweep_columns().size(), "; refusing to touch it (mend or delete that line, or give another -o)");
        done_keys.insert(key_of(row));
      }
      if (last + 1 != text.size()) {
        std::filesystem::resize_file(path, last + 1);
        std::fprintf(options.log, "sweep: dropped an incomplete last line of %s\n", path.c_str());
      }
    }
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) fail("sweep: cannot open '", path, "' for writing");
  auto write_all = [&](const std::string& s) {
    std::size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
      if (n <= 0) {
        ::close(fd);
        fail("sweep: writing '", path, "' failed");
      }
      off += static_cast<std::size_t>(n);
    }
  };
  if (write_header) write_all(header);

  std::vector<const SweepPoint*> sim_todo, cpu_todo;
  for (const SweepPoint& p : points) {
    if (done_keys.count(key_of(p.key()))) {
      ++summary.skipped;
      continue;
    }
    (p.backend == "cpu" ? cpu_todo : sim_todo).push_back(&p);
  }
  const std::size_t todo = sim_todo.size() + cpu_todo.size();
  std::fprintf(options.log, "sweep: %zu points, %zu already in %s, %zu to run (%d jobs)\n", summary.total,
               summary.skipped, path.c_str(), todo, options.jobs);

  std::mutex mu;  // guards the file, the counts and the log
  const auto t_run = Clock::now();
  auto finished = [&](const SweepPoint& p, const SweepOutcome& o) {
    const std::string line = csv_line(csv_row(p, o));
    std::lock_guard lock(mu);
    write_all(line);
    ++summary.done;
    summary.failed += !o.error.empty();
    const double elapsed = seconds_since(t_run);
    const double rate = elapsed > 0 ? static_cast<double>(summary.done) / elapsed : 0.0;
    const double eta = rate > 0 ? static_cast<double>(todo - summary.done) / rate : -1;
    if (options.progress_bar) {
      constexpr int kWidth = 30;
      const int filled = todo ? static_cast<int>(kWidth * summary.done / todo) : kWidth;
      std::fprintf(options.log, "\r[%s%s] %zu/%zu  %.2f points/s  ETA %s  failed %zu ", std::string(filled, '#').c_str(),
                   std::string(kWidth - filled, '.').c_str(), summary.done, todo, rate, human_duration(eta).c_str(),
                   summary.failed);
      if (summary.done == todo) std::fprintf(options.log, "\n");
    } else {
      const std::string cap = p.memory_cap.empty() ? "" : " cap " + p.memory_cap + " " + p.offload_order;
      std::fprintf(options.log, "sweep: %zu/%zu %s %s d=%d %s %s %s %s %s%s: %s (%.2f points/s, ETA %s)\n", summary.done,
                   todo, p.backend.c_str(), p.workload.c_str(), p.devices, p.strategy.c_str(), p.placement.c_str(),
                   p.machine.c_str(), p.network.c_str(), p.policy.c_str(), cap.c_str(),
                   o.error.empty() ? ("makespan " + number(o.makespan_s) + " s").c_str() : ("error: " + o.error).c_str(),
                   rate, human_duration(eta).c_str());
    }
    std::fflush(options.log);
  };

  if (options.distribute) {  // an MPI job: the points spread over the ranks
    std::vector<const SweepPoint*> all = sim_todo;
    all.insert(all.end(), cpu_todo.begin(), cpu_todo.end());
    options.distribute(all, finished);
    ::close(fd);
    if (options.progress_bar && summary.done != todo) std::fprintf(options.log, "\n");
    summary.wall_s = seconds_since(t_start);
    return summary;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stopped{false};
  auto worker = [&](const std::vector<const SweepPoint*>& list) {
    for (;;) {
      if (options.stop()) {
        stopped = true;
        return;
      }
      const std::size_t i = next.fetch_add(1);
      if (i >= list.size()) return;
      if (options.on_start) options.on_start(*list[i]);
      if (options.stop()) {  // asked to stop while starting: leave this point for the next run
        stopped = true;
        return;
      }
      finished(*list[i], run_sweep_point(*list[i]));
    }
  };
  {
    std::vector<std::thread> threads;
    const int jobs = std::max(1, std::min<int>(options.jobs, static_cast<int>(std::max<std::size_t>(1, sim_todo.size()))));
    for (int t = 0; t < jobs; ++t) threads.emplace_back(worker, std::cref(sim_todo));
    for (auto& t : threads) t.join();
  }
  // Measured points one at a time: two at once would share the cores they time.
  next = 0;
  if (!stopped) worker(cpu_todo);
  ::close(fd);
  if (options.progress_bar && summary.done != todo) std::fprintf(options.log, "\n");
  summary.interrupted = stopped && summary.done < todo;
  summary.wall_s = seconds_since(t_start);
  return summary;
}

}  // namespace tessel::experiments
