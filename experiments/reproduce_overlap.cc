// tessel reproduce fused-collective | overlap-priority (experiments/reproduce_overlap.h).
#include "experiments/reproduce_overlap.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <tuple>

#include "core/error.h"
#include "core/io.h"
#include "core/machine.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "experiments/cli.h"
#include "planner/strategy.h"
#include "sim/fuse.h"
#include "sim/simulator.h"

namespace tessel::experiments {
namespace {

struct Sim {
  double makespan_s = 0;
  double comm_utilization = 0;
  int fused_kernels = 0;
};

Sim simulate_one(TaskGraph tg, const Machine& m, bool fuse) {
  sim::SimOptions so;
  Sim out;
  if (fuse) out.fused_kernels = sim::fuse_collectives_into(tg, m, so);
  const sim::SimResult r = sim::simulate(tg, m, so);
  out.makespan_s = r.makespan_s;
  double comm = 0;
  for (const auto& d : r.devices) comm += d.comm_busy_s;
  const double device_s = r.makespan_s * static_cast<double>(r.devices.size());
  out.comm_utilization = device_s > 0 ? comm / device_s : 0.0;
  return out;
}

// Draws `csv` with plots/bars.py into DIR/NAME<suffix>.png.
void draw(const ReproduceOptions& o, ReproduceResult& res, const std::string& name, const std::string& suffix,
          const std::vector<std::string>& args, const std::function<void(std::string)>& say) {
  const std::string png = (std::filesystem::path(o.dir) / (name + suffix + ".png")).string();
  std::string cmd = shell_quote(o.plots_dir + "/python.sh") + " " + shell_quote(o.plots_dir + "/bars.py") + " " + shell_quote(res.csv) +
                    " " + shell_quote(png);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  std::fflush(o.out);
  std::fflush(stdout);
  if (std::system(cmd.c_str()) != 0)
    fail("reproduce ", name, ": drawing ", png, " failed (bars.py through plots/python.sh; the CSV ", res.csv,
         " is complete)");
  res.pngs.push_back(png);
  say("png: " + png);
}

}  // namespace

ReproduceResult reproduce_fused_collective(const ReproduceOptions& o, const std::string& summary) {
  const std::string name = "fused-collective";
  struct Collective {
    std::string label, workload, size_param;
    std::vector<std::string> sizes, quick_sizes;
    std::string parts;  // with D for the device count
    double published_max_pct, published_mean_pct;
  };
  // Published reductions, arXiv 2305.06942 (SC24), intra-node figures: GEMM + All-to-All
  // 12% average, up to 20%; GEMV + AllReduce 13% average, up to 22%; Embedding + All-to-All
  // 20% average, up to 32% (inter-node 31% average).
  const std::vector<Collective> collectives{
      {"gemm+all-to-all", "gemm-alltoall:experts=D,dim=4096,out=4096,dtype=bf16,tokens=", "tokens",
       {"1024", "4096", "16384"}, {"256", "1024"}, "x=Dx1x1,w=Dx1x1,gemm=Dx1x1x1,act=1xDx1,out=1xDx1", 20, 12},
      {"gemv+all-reduce", "gemv-allreduce:batch=1,dtype=bf16,cols=", "cols", {"8192", "16384", "32768"},
       {"1024", "4096"}, "W=1xD,x=Dx1,V=Dx1,gemv=1x1xD,act=Dx1,next=Dx1x1,out=Dx1", 22, 13},
      {"embedding+all-to-all", "embedding-alltoall:tables=64,vocab=64,dim=256,dtype=bf16,batch=", "batch",
       {"1024", "4096", "16384"}, {"256", "1024"}, "onehot=1xDx1,tables=Dx1x1,embed=1xDx1x1,act=Dx1x1,out=Dx1x1", 32, 20},
  };
  struct Scale {
    std::string label, machine;
    int devices;
  };
  const std::vector<Scale> scales{{"intra-node", "h100-sxm-8", 8}, {"inter-node", "cluster:2xh100-sxm-8", 16}};
  std::fprintf(o.out, "%s: %s\n  bulk (GEMM, then the collective) against fused (output tiles sent as they finish, "
               "12.5%% occupancy for the communication code), simulated%s\n",
               name.c_str(), summary.c_str(), o.quick ? " (--quick: reduced sizes)" : "");
  OutputBatch files;  // the CSV and traces: all in place before the plots, or none
  files.add_folder("-o", o.dir);
  ReproduceResult res;
  auto say = [&](std::string line) {
    std::fprintf(o.out, "  %s\n", line.c_str());
    res.headlines.push_back(std::move(line));
  };
  std::string csv = csv_line({"collective", "scale", "machine", "devices", "size", "workload", "mode", "makespan_s",
                              "comm_utilization", "fused_kernels", "reduction_pct"});
  for (const Scale& sc : scales) {
    const Machine m = load_machine(sc.machine);
    for (const Collective& c : collectives) {
      // D: the device count, in the parts and in the workload (gemm-alltoall's experts).
      auto with_devices = [&](std::string text) {  // no other capital D in these strings
        for (std::size_t p; (p = text.find('D')) != std::string::npos;) text.replace(p, 1, std::to_string(sc.devices));
        return text;
      };
      const std::string parts = with_devices(c.parts);
      double best = 0, sum = 0;
      int n = 0;
      std::string best_size;
      for (const std::string& size : o.quick ? c.quick_sizes : c.sizes) {
        const std::string w = with_devices(c.workload) + size;
        const Graph g = build_workload(w);
        const TaskGraph tg = lower(g, cli::decomposition_from_parts_spec(g, sc.devices, parts));
        const Sim bulk = simulate_one(tg, m, false);
        const Sim fused = simulate_one(tg, m, true);
        res.points += 2;  // a CSV row each
        if (fused.fused_kernels == 0) fail("reproduce ", name, ": ", w, " with --parts ", parts, " has nothing to fuse");
        const double pct = 100.0 * (1.0 - fused.makespan_s / bulk.makespan_s);
        for (const auto& [mode, s, red] : {std::tuple{"bulk", bulk, 0.0}, std::tuple{"fused", fused, pct}})
          csv += csv_line({c.label, sc.label, sc.machine, std::to_string(sc.devices), size, w, mode,
                           fmt("%.9g", s.makespan_s), fmt("%.6g", s.comm_utilization), std::to_string(s.fused_kernels),
                           fmt("%.3f", red)});
        if (n == 0 || pct > best) {
          best = pct;
          best_size = size;
        }
        sum += pct;
        ++n;
        say(c.label + " " + sc.label + " (" + std::to_string(sc.devices) + " GPUs) " + c.size_param + "=" + size +
            ": bulk " + fmt("%.4g us", bulk.makespan_s * 1e6) + ", fused " + fmt("%.4g us", fused.makespan_s * 1e6) +
            " (" + fmt("%+.1f%%", -pct) + ")");
      }
      say(c.label + " " + sc.label + ": fused against bulk " + fmt("%+.1f%%", -sum / n) + " on average, best " +
          fmt("%+.1f%%", -best) + " (" + c.size_param + "=" + best_size + "); published: " +
          fmt("%.0f%%", c.published_mean_pct) + " lower on average, up to " + fmt("%.0f%%", c.published_max_pct) + " lower" +
          (c.label == "embedding+all-to-all" && sc.label == "inter-node" ? " (inter-node: 31% on average)" : "") +
          " (arXiv 2305.06942)");
    }
  }
  res.csv = (std::filesystem::path(o.dir) / (name + ".csv")).string();
  files.stage(res.csv, csv);
  say("csv: " + res.csv);
  files.commit();
  if (o.plot)
    for (const Scale& sc : scales)
      draw(o, res, name, "-" + sc.label,
           {"--x", "size", "--y", "makespan_s", "--group", "mode", "--panel", "collective", "--where",
            "scale=" + sc.label, "--scale-y", "1e6", "--xlabel", "size (tokens / cols / batch)", "--ylabel",
            "makespan (us)", "--title", "bulk vs fused, " + sc.label + " (" + std::to_string(sc.devices) + " simulated H100s)"},
           say);
  return res;
}

ReproduceResult reproduce_overlap_priority(const ReproduceOptions& o, const std::string& summary) {
  const std::string name = "overlap-priority";
  struct Config {
    std::string label;
    CommPriority priority;
    bool reserve;
  };
  const std::vector<Config> configs{{"normal", CommPriority::normal, false},
                                    {"high-priority", CommPriority::high, false},
                                    {"sm-reserved", CommPriority::normal, true},
                                    {"high+reserved", CommPriority::high, true}};
  // SMs left to communication: NCCL's default of 16 channels on NVLink (one CTA each;
  // NCCL_MAX_NCHANNELS caps it), about 12% of an H100's 132 SMs, 15% of an A100's 108.
  const int reserved_sms = 16;
  struct Work {
    std::string workload, quick_workload, strategy;
    int devices;
  };
  const std::vector<Work> works{{"llama-block:model=7b", "llama-block:model=7b,seq=128", "eindecomp", 8},
                                {"ffn:tokens=8192,dim=4096,hidden=14336", "ffn:tokens=1024,dim=1024,hidden=4096", "megatron", 8},
                                {"chain:size=16384", "chain:size=2048", "eindecomp", 8}};
  const std::vector<std::string> machines{"h100-sxm-8", "a100-sxm-8"};
  std::fprintf(o.out,
               "%s: %s\n  communication stream at normal or high priority, without or with %d SMs reserved for it, "
               "simulated with the machine's interference rows%s\n",
               name.c_str(), summary.c_str(), reserved_sms, o.quick ? " (--quick: reduced sizes)" : "");
  OutputBatch files;  // the CSV and traces: all in place before the plots, or none
  files.add_folder("-o", o.dir);
  ReproduceResult res;
  auto say = [&](std::string line) {
    std::fprintf(o.out, "  %s\n", line.c_str());
    res.headlines.push_back(std::move(line));
  };
  std::string csv = csv_line({"machine", "workload", "strategy", "devices", "config", "comm_priority", "comm_sms",
                              "compute_slowdown", "comm_slowdown", "makespan_s", "no_interference_s", "comm_utilization",
                              "reduction_pct"});
  double best = 0;
  std::string best_where;
  for (const std::string& mname : machines) {
    for (const Work& wk : works) {
      const std::string w = o.quick ? wk.quick_workload : wk.workload;
      const Graph g = build_workload(w);
      // Each setting planned on the machine it sets: eindecomp's refinement simulates with
      // the interference that setting gives.
      auto plan_on = [&](const Machine& m) {
        planner::PlanOptions po;
        po.devices = wk.devices;
        po.machine = m;
        return lower(g, planner::plan(g, wk.strategy, po).decomposition);
      };
      Machine free = load_machine(mname);
      free.interference = Interference::none();
      const double ideal = simulate_one(plan_on(free), free, false).makespan_s;
      double base = 0;
      std::string line = mname + " " + w + " (" + wk.strategy + ", " + std::to_string(wk.devices) + " GPUs):";
      for (const Config& c : configs) {
        Machine m = load_machine(mname);
        InterferenceSettings s;
        s.set_priority = s.set_sms = true;
        s.comm_priority = c.priority;
        s.comm_sms = c.reserve ? reserved_sms : 0;
        s.apply(m);
        const SlowdownFactors f = m.interference.resolve(m.device_types[0].sm_count);
        const Sim r = simulate_one(plan_on(m), m, false);
        ++res.points;
        if (c.label == "normal") base = r.makespan_s;
        const double pct = 100.0 * (1.0 - r.makespan_s / base);
        csv += csv_line({mname, w, wk.strategy, std::to_string(wk.devices), c.label,
                         std::string(to_string(c.priority)), std::to_string(s.comm_sms), fmt("%.6g", f.compute_slowdown),
                         fmt("%.6g", f.comm_slowdown), fmt("%.9g", r.makespan_s), fmt("%.9g", ideal),
                         fmt("%.6g", r.comm_utilization), fmt("%.3f", pct)});
        line += " " + c.label + " " + fmt("%.4g ms", r.makespan_s * 1e3) +
                (c.label == "normal" ? std::string() : " (" + fmt("%+.1f%%", -pct) + ")");
        if (pct > best) {
          best = pct;
          best_where = mname + " " + w + " " + c.label;
        }
      }
      say(line + "; perfect overlap " + fmt("%.4g ms", ideal * 1e3));
    }
  }
  say("largest reduction against normal priority without reserved SMs: " + fmt("%.1f%%", best) + " (" + best_where +
      "); published: up to 25.5% lower total time (resource-aware overlap, arXiv 2606.09200; measured on A40, A100, "
      "H100, MI250X)");
  say("the factors are the presets' published defaults (core/machine.h); `tessel calibrate --backend cuda --overlap` "
      "measures them on a GPU");
  res.csv = (std::filesystem::path(o.dir) / (name + ".csv")).string();
  files.stage(res.csv, csv);
  say("csv: " + res.csv);
  files.commit();
  if (o.plot)
    draw(o, res, name, "",
         {"--x", "workload", "--y", "makespan_s", "--group", "config", "--panel", "machine", "--scale-y", "1e3",
          "--xlabel", "workload", "--ylabel", "makespan (ms)", "--title", "stream priority and reserved SMs"},
         say);
  return res;
}

}  // namespace tessel::experiments
