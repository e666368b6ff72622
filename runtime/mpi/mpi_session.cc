#include "runtime/mpi/mpi_session.h"

#include <mpi.h>

#include <cstdio>
#include <limits>
#include <thread>

#include "core/stats.h"

namespace tessel::runtime::mpi {
namespace {

// Finalises MPI when the process exits (static destruction after main returns).
struct Finalizer {
  ~Finalizer() {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Finalize();
  }
};

}  // namespace

void ensure_initialized() {
  int init = 0;
  MPI_Initialized(&init);
  if (init) return;
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    fail("--backend mpi: MPI_Init_thread failed (start the job with mpirun -np R tessel ...)");
  static Finalizer finalizer;
  if (provided < MPI_THREAD_SERIALIZED)
    fail("--backend mpi: the MPI library gives thread level ", provided, " but the executor needs MPI_THREAD_SERIALIZED");
}

bool active() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::string describe_rank() { return "rank " + std::to_string(rank()) + " of " + std::to_string(size()); }

void abort_job(const std::string& message, int code) {
  if (!active()) return;
  std::fprintf(stderr, "tessel: error: %s: %s\n", describe_rank().c_str(), message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
}

void lazy_barrier() {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  for (;;) {
    int done = 0;
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<double> clock_offsets() {
  const int me = rank(), n = size();
  constexpr int kRounds = 16;
  constexpr int kTag = 1;
  std::vector<double> offsets(static_cast<std::size_t>(n), 0.0);
  for (int r = 1; r < n; ++r) {
    if (me == 0) {
      double best_rtt = std::numeric_limits<double>::infinity();
      for (int k = 0; k < kRounds; ++k) {
        double remote = 0;
        const double t1 = now_s();
        MPI_Send(&t1, 1, MPI_DOUBLE, r, kTag, MPI_COMM_WORLD);
        MPI_Recv(&remote, 1, MPI_DOUBLE, r, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        const double t2 = now_s();
        if (t2 - t1 < best_rtt) {
          best_rtt = t2 - t1;
          offsets[static_cast<std::size_t>(r)] = remote - 0.5 * (t1 + t2);
        }
      }
    } else if (me == r) {
      for (int k = 0; k < kRounds; ++k) {
        double t = 0;
        MPI_Recv(&t, 1, MPI_DOUBLE, 0, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        t = now_s();
        MPI_Send(&t, 1, MPI_DOUBLE, 0, kTag, MPI_COMM_WORLD);
      }
    }
  }
  MPI_Bcast(offsets.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return offsets;
}

P2pFigures measure_p2p(std::int64_t bytes, int rounds) {
  const int me = rank(), n = size();
  constexpr int kTag = 2;
  if (bytes < 8 || bytes > std::numeric_limits<int>::max()) fail("mpi p2p probe: ", bytes, " bytes out of range");
  std::vector<char> big(static_cast<std::size_t>(bytes), 1), small(8, 1);
  P2pFigures f;
  f.bytes = bytes;
  f.latency_by_rank_s.assign(static_cast<std::size_t>(n), 0.0);
  f.bytes_per_s_by_rank.assign(static_cast<std::size_t>(n), 0.0);
  // One round trip of `len` bytes each way, timed on rank 0.
  auto pingpong = [&](int r, std::vector<char>& buf, bool timed) {
    const int len = static_cast<int>(buf.size());
    if (me == 0) {
      const double t1 = now_s();
      MPI_Send(buf.data(), len, MPI_BYTE, r, kTag, MPI_COMM_WORLD);
      MPI_Recv(buf.data(), len, MPI_BYTE, r, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      return timed ? now_s() - t1 : 0.0;
    }
    MPI_Recv(buf.data(), len, MPI_BYTE, 0, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(buf.data(), len, MPI_BYTE, 0, kTag, MPI_COMM_WORLD);
    return 0.0;
  };
  for (int r = 1; r < n; ++r) {
    if (me != 0 && me != r) continue;
    for (int w = 0; w < 3; ++w) (void)pingpong(r, small, false);
    std::vector<double> lat, bw;
    for (int k = 0; k < rounds; ++k) {
      // Latency: the median of 20 round trips of 8 bytes, halved.
      std::vector<double> trips;
      for (int j = 0; j < 20; ++j) trips.push_back(pingpong(r, small, true));
      lat.push_back(0.5 * stats::median(trips));
      (void)pingpong(r, big, false);
      const double rtt = pingpong(r, big, true);
      bw.push_back(rtt > 0 ? 2.0 * static_cast<double>(bytes) / rtt : 0.0);
    }
    if (me == 0) {
      f.latency_by_rank_s[static_cast<std::size_t>(r)] = stats::median(lat);
      f.bytes_per_s_by_rank[static_cast<std::size_t>(r)] = stats::median(bw);
    }
  }
  if (me == 0 && n > 1) {
    f.latency_s = stats::median(std::vector<double>(f.latency_by_rank_s.begin() + 1, f.latency_by_rank_s.end()));
    f.bytes_per_s = stats::median(std::vector<double>(f.bytes_per_s_by_rank.begin() + 1, f.bytes_per_s_by_rank.end()));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return f;
}

}  // namespace tessel::runtime::mpi
