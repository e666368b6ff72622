#pragma once
// What a move between ranks costs through the MPI backend itself (`calibrate --backend
// mpi`): a task graph of one move — an input block on device 0, moved to the first device
// of rank r, an output there — run by MpiExecutor `rounds` times at a small and at a large
// size, its span taken from rank 0's merged timeline (from the packing on the source to
// the arrival, as `run --trace` shows a move). Unlike a blocking ping-pong this includes
// what every move of a run pays: the source worker's packing copy, the hand-over to the
// communication threads, their wake-ups and OpenMPI's rendezvous handshake.
//
// The figures for the simulator's links: latency = the median span of the small move
// (less its bytes at the large move's rate), bandwidth = the extra bytes of the large
// move over the extra time it took. Collective (every rank calls it alike); valid on rank 0.

#include <cstdint>
#include <vector>

namespace tessel::runtime::mpi {

struct MoveFigures {
  std::int64_t small_bytes = 0, large_bytes = 0;
  std::vector<double> small_span_s;        // by rank, median over rounds ([0] unused)
  std::vector<double> large_span_s;        // by rank
  std::vector<double> latency_by_rank_s;   // by rank: fixed cost of one move
  std::vector<double> bytes_per_s_by_rank; // by rank: rate of its bytes
  double latency_s = 0;                    // median over ranks 1..R-1
  double bytes_per_s = 0;                  // median over ranks 1..R-1
};

// `devices`: the logical devices of the probe's task graph (at least the job's ranks).
[[nodiscard]] MoveFigures measure_moves(int devices, std::int64_t small_bytes, std::int64_t large_bytes, int rounds);

}  // namespace tessel::runtime::mpi
