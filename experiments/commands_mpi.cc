// The MPI backend's part of the CLI (see backend.h): compiled into every build, with the
// MPI calls only where the backend was built.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>

#include "core/error.h"
#include "experiments/backend.h"

#include <thread>

#include <nlohmann/json.hpp>

#include "core/machine.h"
#include "experiments/cli.h"

#ifdef TESSEL_HAVE_MPI
#include <mpi.h>

#include "runtime/calibrate.h"
#include "runtime/mpi/mpi_executor.h"
#include "runtime/mpi/move_probe.h"
#include "runtime/mpi/mpi_session.h"
#endif

namespace tessel::cli {
namespace {

// The job size the launcher announces (OpenMPI, MPICH / Hydra, PMIx), or 1.
int launched_ranks() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* s = std::getenv(v)) return std::max(1, std::atoi(s));
  return 1;
}

}  // namespace

#ifdef TESSEL_HAVE_MPI

bool mpi_backend_built() { return true; }

namespace {

nlohmann::json outcome_to_json(std::size_t index, const experiments::SweepOutcome& o) {
  return {{"index", index},
          {"makespan_s", o.makespan_s},
          {"bytes_moved", o.bytes_moved},
          {"peak_memory_bytes", o.peak_memory_bytes},
          {"compute_utilization", o.compute_utilization},
          {"comm_utilization", o.comm_utilization},
          {"tasks", o.tasks},
          {"events", o.events},
          {"evicts", o.evicts},
          {"loads", o.loads},
          {"bytes_evicted", o.bytes_evicted},
          {"bytes_loaded", o.bytes_loaded},
          {"prefetch", o.prefetch},
          {"plan_wall_s", o.plan_wall_s},
          {"lower_wall_s", o.lower_wall_s},
          {"memory_plan_wall_s", o.memory_plan_wall_s},
          {"sim_wall_s", o.sim_wall_s},
          {"fused_kernels", o.fused_kernels},
          {"error", o.error}};
}

experiments::SweepOutcome outcome_from_json(const nlohmann::json& j) {
  experiments::SweepOutcome o;
  o.makespan_s = j.at("makespan_s").get<double>();
  o.bytes_moved = j.at("bytes_moved").get<std::int64_t>();
  o.peak_memory_bytes = j.at("peak_memory_bytes").get<std::int64_t>();
  o.compute_utilization = j.at("compute_utilization").get<double>();
  o.comm_utilization = j.at("comm_utilization").get<double>();
  o.tasks = j.at("tasks").get<std::int64_t>();
  o.events = j.at("events").get<std::int64_t>();
  o.evicts = j.at("evicts").get<std::int64_t>();
  o.loads = j.at("loads").get<std::int64_t>();
  o.bytes_evicted = j.at("bytes_evicted").get<std::int64_t>();
  o.bytes_loaded = j.at("bytes_loaded").get<std::int64_t>();
  o.prefetch = j.at("prefetch").get<std::string>();
  o.plan_wall_s = j.at("plan_wall_s").get<double>();
  o.lower_wall_s = j.at("lower_wall_s").get<double>();
  o.memory_plan_wall_s = j.at("memory_plan_wall_s").get<double>();
  o.sim_wall_s = j.at("sim_wall_s").get<double>();
  o.fused_kernels = j.at("fused_kernels").get<int>();
  o.error = j.at("error").get<std::string>();
  return o;
}

// Runs points `mine` (indices into `points`): simulated ones on `jobs` threads, measured
// (cpu) ones after them one at a time; `report` (thread-safe) gets each as it finishes.
void run_share(const std::vector<experiments::SweepPoint>& points, const std::vector<std::size_t>& mine, int jobs,
               const std::function<void(std::size_t, const experiments::SweepOutcome&)>& report) {
  std::vector<std::size_t> sim, cpu;
  for (std::size_t i : mine) (points[i].backend == "cpu" ? cpu : sim).push_back(i);
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t k; (k = next.fetch_add(1)) < sim.size();) report(sim[k], experiments::run_sweep_point(points[sim[k]]));
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, std::min<int>(jobs, static_cast<int>(sim.size()))); ++t) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  for (std::size_t i : cpu) report(i, experiments::run_sweep_point(points[i]));
}

constexpr int kSweepTag = 11;

}  // namespace

bool sweep_over_ranks(const experiments::SweepSpec& spec, experiments::SweepOptions& options, bool jobs_given) {
  if (launched_ranks() <= 1) return true;
  runtime::mpi::ensure_initialized();
  const int me = runtime::mpi::rank(), ranks = runtime::mpi::size();
  if (ranks <= 1) return true;
  if (!jobs_given) options.jobs = std::max(1, options.jobs / ranks);
  const std::vector<experiments::SweepPoint> points = experiments::sweep_points(spec);
  if (me == 0) {
    options.distribute = [points, ranks, jobs = options.jobs](const std::vector<const experiments::SweepPoint*>& todo,
                                                              const experiments::SweepOptions::Finished& finished) {
      std::map<std::string, std::size_t> index;
      for (std::size_t i = 0; i < points.size(); ++i) index.emplace(experiments::csv_line(points[i].key()), i);
      std::vector<std::uint64_t> all;
      for (const experiments::SweepPoint* p : todo) all.push_back(index.at(experiments::csv_line(p->key())));
      std::uint64_t n = all.size();
      MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
      MPI_Bcast(all.data(), static_cast<int>(n), MPI_UINT64_T, 0, MPI_COMM_WORLD);
      std::fprintf(stderr, "sweep: %zu points over %d ranks (point k on rank k mod %d)\n", todo.size(), ranks, ranks);
      std::vector<std::size_t> mine;
      for (std::size_t k = 0; k < all.size(); k += static_cast<std::size_t>(ranks)) mine.push_back(all[k]);
      std::thread local([&] {
        run_share(points, mine, jobs, [&](std::size_t i, const experiments::SweepOutcome& o) { finished(points[i], o); });
      });
      // The other ranks' rows as they come; the main thread alone calls MPI.
      int left = ranks - 1;
      while (left > 0) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, kSweepTag, MPI_COMM_WORLD, &flag, &st);
        if (!flag) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        int count = 0;
        MPI_Get_count(&st, MPI_CHAR, &count);
        std::string text(static_cast<std::size_t>(count), '\0');
        MPI_Recv(text.data(), count, MPI_CHAR, st.MPI_SOURCE, kSweepTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        const nlohmann::json j = nlohmann::json::parse(text);
        if (j.contains("done")) {
          --left;
          continue;
        }
        finished(points.at(j.at("index").get<std::size_t>()), outcome_from_json(j));
      }
      local.join();
    };
    return true;
  }
  // Another rank: its share of the points rank 0 found still to run, each row sent to
  // rank 0 as it finishes.
  std::uint64_t n = 0;
  MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  std::vector<std::uint64_t> all(n);
  MPI_Bcast(all.data(), static_cast<int>(n), MPI_UINT64_T, 0, MPI_COMM_WORLD);
  std::vector<std::size_t> mine;
  for (std::size_t k = static_cast<std::size_t>(me); k < all.size(); k += static_cast<std::size_t>(ranks))
    mine.push_back(all[k]);
  std::mutex mu;
  std::deque<std::string> outbox;
  std::atomic<bool> share_done{false};
  std::thread worker([&] {
    run_share(points, mine, options.jobs, [&](std::size_t i, const experiments::SweepOutcome& o) {
      std::lock_guard<std::mutex> lock(mu);
      outbox.push_back(outcome_to_json(i, o).dump());
    });
    share_done = true;
  });
  for (;;) {
    std::string msg;
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!outbox.empty()) {
        msg = std::move(outbox.front());
        outbox.pop_front();
      } else if (share_done) {
        last = true;
      }
    }
    if (last) break;
    if (msg.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    MPI_Send(msg.data(), static_cast<int>(msg.size()), MPI_CHAR, 0, kSweepTag, MPI_COMM_WORLD);
  }
  worker.join();
  const std::string done = R"({"done": true})";
  MPI_Send(done.data(), static_cast<int>(done.size()), MPI_CHAR, 0, kSweepTag, MPI_COMM_WORLD);
  return false;
}

std::unique_ptr<runtime::Executor> make_mpi_executor(runtime::Policy policy) {
  return std::make_unique<runtime::MpiExecutor>(policy);
}

bool reports_results(const runtime::Executor& exec) {
  const auto* m = dynamic_cast<const runtime::MpiExecutor*>(&exec);
  return !m || m->reports();
}

std::pair<int, int> mpi_rank_and_size() {
  if (!runtime::mpi::active()) return {0, 1};
  return {runtime::mpi::rank(), runtime::mpi::size()};
}

void check_mpi_memory_cap(const std::string& backend, bool capped) {
  if (backend != "mpi" || !capped || launched_ranks() <= 1) return;
  runtime::mpi::ensure_initialized();  // so that rank 0 alone prints it (error_exit)
  const int ranks = runtime::mpi::size();
  if (ranks > 1)
    throw runtime::mpi::CollectiveError("--memory-cap with --backend mpi: a memory-capped task graph cannot run split over the job's " +
      std::to_string(ranks) + " ranks (a move from another process would be received into a planned range before this "
      "process's earlier users of it are done); run it in one process (--backend cpu, or mpirun -np 1)");
}

bool calibrate_mpi_backend(int devices, double seconds_per_point, int rounds, Machine* machine,
                           nlohmann::json* report) {
  runtime::mpi::ensure_initialized();
  const int me = runtime::mpi::rank(), ranks = runtime::mpi::size();
  if (devices <= 0) devices = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (ranks > devices)
    throw runtime::mpi::CollectiveError("calibrate --backend mpi: the job has " + std::to_string(ranks) +
                                        " ranks but only " + std::to_string(devices) +
                                        " devices (-d): every rank owns at least one");
  // The CPU figures: rank 0 with every device's worker busy, as in a run of the job on
  // one machine; the other ranks wait without spinning.
  runtime::Calibration c;
  if (me == 0) {
    std::fprintf(stderr, "calibrating the CPU backend with %d workers on rank 0 (%d rounds)...\n", devices, rounds);
    c = runtime::calibrate_cpu({devices, seconds_per_point, rounds});
  }
  runtime::mpi::lazy_barrier();
  constexpr std::int64_t kProbeBytes = 4 << 20;
  if (me == 0) std::fprintf(stderr, "measuring point-to-point latency and bandwidth between %d ranks...\n", ranks);
  const runtime::mpi::P2pFigures p2p = runtime::mpi::measure_p2p(kProbeBytes, std::max(3, rounds));
  // What the links carry in the model: a move through the backend itself (packing,
  // hand-over, wake-ups, handshake), not the blocking ping-pong's bare transport.
  constexpr std::int64_t kSmallMoveBytes = 64 << 10;
  if (me == 0) std::fprintf(stderr, "measuring moves between ranks through the MPI backend...\n");
  const runtime::mpi::MoveFigures moves =
      runtime::mpi::measure_moves(devices, kSmallMoveBytes, kProbeBytes, std::max(10, 3 * rounds));
  if (me != 0) return false;
  Machine m = runtime::machine_from_calibration(c);
  m.name = "mpi-calibrated:" + std::to_string(devices) + "x" + std::to_string(ranks) + "ranks";
  if (ranks > 1) {
    // Each rank's way out to and in from the others: a move between devices of two ranks
    // crosses the sender's out link (it carries the move's fixed cost) and the receiver's
    // in link, at the rate of a move's bytes measured between rank 0 and that rank
    // (the median over ranks for rank 0's own links).
    std::vector<LinkId> out(static_cast<std::size_t>(ranks)), in(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      const double bw = r == 0 ? moves.bytes_per_s : moves.bytes_per_s_by_rank[static_cast<std::size_t>(r)];
      const double lat = r == 0 ? moves.latency_s : moves.latency_by_rank_s[static_cast<std::size_t>(r)];
      m.links.push_back(Link{"rank" + std::to_string(r) + ".mpi.out", LinkKind::network, bw, lat});
      out[static_cast<std::size_t>(r)] = LinkId(static_cast<std::int32_t>(m.links.size() - 1));
      m.links.push_back(Link{"rank" + std::to_string(r) + ".mpi.in", LinkKind::network, bw, 0.0});
      in[static_cast<std::size_t>(r)] = LinkId(static_cast<std::int32_t>(m.links.size() - 1));
    }
    std::vector<int> rank_of(static_cast<std::size_t>(devices));
    for (int r = 0; r < ranks; ++r) {
      auto [first, last] = runtime::MpiExecutor::devices_of(r, ranks, devices);
      for (int d = first; d < last; ++d) rank_of[static_cast<std::size_t>(d)] = r;
    }
    for (int a = 0; a < devices; ++a)
      for (int b = 0; b < devices; ++b) {
        const int ra = rank_of[static_cast<std::size_t>(a)], rb = rank_of[static_cast<std::size_t>(b)];
        if (ra != rb)
          m.routes.push_back(RouteEntry{DeviceId(a), DeviceId(b),
                                        {out[static_cast<std::size_t>(ra)], in[static_cast<std::size_t>(rb)]}});
      }
  }
  m.validate(m.name);
  *machine = std::move(m);
  nlohmann::json j = runtime::to_json(c);
  j["ranks"] = ranks;
  j["p2p_latency_s"] = p2p.latency_s;
  j["p2p_bytes_per_s"] = p2p.bytes_per_s;
  j["p2p_probe_bytes"] = p2p.bytes;
  j["p2p_latency_by_rank_s"] = p2p.latency_by_rank_s;
  j["p2p_bytes_per_s_by_rank"] = p2p.bytes_per_s_by_rank;
  j["move_latency_s"] = moves.latency_s;
  j["move_bytes_per_s"] = moves.bytes_per_s;
  j["move_latency_by_rank_s"] = moves.latency_by_rank_s;
  j["move_bytes_per_s_by_rank"] = moves.bytes_per_s_by_rank;
  j["move_probe_bytes"] = {moves.small_bytes, moves.large_bytes};
  j["move_span_s_by_rank"] = {moves.small_span_s, moves.large_span_s};
  *report = std::move(j);
  std::fprintf(stderr, "  MPI point to point: %s one-way latency, %s/s (%s messages), median over ranks 1-%d\n",
               human_seconds(p2p.latency_s).c_str(), human_bytes(p2p.bytes_per_s).c_str(),
               human_bytes(static_cast<double>(p2p.bytes)).c_str(), ranks - 1);
  std::fprintf(stderr, "  a move through the backend: %s fixed, %s/s (%s and %s moves), median over ranks 1-%d: the links' figures\n",
               human_seconds(moves.latency_s).c_str(), human_bytes(moves.bytes_per_s).c_str(),
               human_bytes(static_cast<double>(moves.small_bytes)).c_str(),
               human_bytes(static_cast<double>(moves.large_bytes)).c_str(), ranks - 1);
  return true;
}

int error_exit(int code, const std::string& line, const std::exception* error) {
  if (runtime::mpi::active() && runtime::mpi::size() > 1) {
    if (dynamic_cast<const runtime::mpi::CollectiveError*>(error)) {
      if (runtime::mpi::rank() == 0) std::cerr << line << '\n';
      return code;
    }
    // Only this rank failed: the others may be waiting for it. Name the rank and end the job.
    const std::string prefix = "tessel: error: ";
    runtime::mpi::abort_job(line.rfind(prefix, 0) == 0 ? line.substr(prefix.size()) : line, code);
  }
  std::cerr << line << '\n';
  return code;
}

#else

bool mpi_backend_built() { return false; }

std::unique_ptr<runtime::Executor> make_mpi_executor(runtime::Policy) {
  fail("--backend mpi: this build has no MPI backend (configured without an MPI library found, or with "
       "-DTESSEL_MPI=OFF; on Debian: apt-get install libopenmpi-dev openmpi-bin, then rebuild)");
}

bool reports_results(const runtime::Executor&) { return true; }

void check_mpi_memory_cap(const std::string&, bool) {}  // make_mpi_executor refuses the backend

std::pair<int, int> mpi_rank_and_size() { return {0, 1}; }

bool sweep_over_ranks(const experiments::SweepSpec&, experiments::SweepOptions&, bool) {
  // Several copies of one sweep would append to the same file at once.
  if (launched_ranks() > 1)
    fail("sweep: started by mpirun with ", launched_ranks(),
         " ranks, but this build has no MPI backend to split the points over them: run one process (or rebuild with "
         "MPI)");
  return true;
}

bool calibrate_mpi_backend(int, double, int, Machine*, nlohmann::json*) {
  fail("calibrate --backend mpi: this build has no MPI backend (configured without an MPI library found, or with "
       "-DTESSEL_MPI=OFF)");
}

int error_exit(int code, const std::string& line, const std::exception*) {
  std::cerr << line << '\n';
  return code;
}

#endif

}  // namespace tessel::cli
