// The MPI backend's part of the CLI (see backend.h): compiled into every build, with the
// MPI calls only where the backend was built.
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "experiments/backend.h"

#include <thread>

#include <nlohmann/json.hpp>

#include "core/machine.h"
#include "experiments/cli.h"

#ifdef TESSEL_HAVE_MPI
#include "runtime/calibrate.h"
#include "runtime/mpi/mpi_executor.h"
#include "runtime/mpi/mpi_session.h"
#endif

namespace tessel::cli {

#ifdef TESSEL_HAVE_MPI

bool mpi_backend_built() { return true; }

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
  if (me != 0) return false;
  Machine m = runtime::machine_from_calibration(c);
  m.name = "mpi-calibrated:" + std::to_string(devices) + "x" + std::to_string(ranks) + "ranks";
  if (ranks > 1) {
    // Each rank's way out to and in from the others: a move between devices of two ranks
    // crosses the sender's out link (it carries the one-way latency) and the receiver's
    // in link, at the bandwidth measured between those ranks (rank 0's figures for
    // rank 0's links, the median for rank 0's own).
    std::vector<LinkId> out(static_cast<std::size_t>(ranks)), in(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      const double bw = r == 0 ? p2p.bytes_per_s : p2p.bytes_per_s_by_rank[static_cast<std::size_t>(r)];
      const double lat = r == 0 ? p2p.latency_s : p2p.latency_by_rank_s[static_cast<std::size_t>(r)];
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
  *report = std::move(j);
  std::fprintf(stderr, "  MPI point to point: %s one-way latency, %s/s (%s messages), median over ranks 1-%d\n",
               human_seconds(p2p.latency_s).c_str(), human_bytes(p2p.bytes_per_s).c_str(),
               human_bytes(static_cast<double>(p2p.bytes)).c_str(), ranks - 1);
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

std::pair<int, int> mpi_rank_and_size() { return {0, 1}; }

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
