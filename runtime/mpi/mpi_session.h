#pragma once
// The process's place in an MPI job (runtime/mpi/, target tessel_runtime_mpi): MPI is
// initialised on first use (MPI_THREAD_SERIALIZED: the executor's communication thread
// calls MPI while the main thread waits) and finalised when the process exits. A process
// started without mpirun is a job of one rank (OpenMPI's singleton start).
//
// Errors in a job of several ranks: an error every rank sees alike (too many ranks,
// ranks that disagree about the graph) is thrown on every rank as a CollectiveError and
// printed by rank 0 only; any other error ends the whole job (abort_job: a line naming
// the rank, then MPI_Abort), so that no rank waits forever for one that has gone.

#include <chrono>
#include <string>
#include <vector>

#include "core/error.h"

namespace tessel::runtime::mpi {

// Initialises MPI once; Error when the library cannot start or lacks the thread level.
void ensure_initialized();
// True once MPI is initialised (and not yet finalised).
[[nodiscard]] bool active();
[[nodiscard]] int rank();
[[nodiscard]] int size();
// "rank 1 of 4"
[[nodiscard]] std::string describe_rank();

// Thrown alike on every rank; only rank 0 prints it.
class CollectiveError : public Error {
 public:
  explicit CollectiveError(const std::string& message) : Error(message) {}
};

// Prints `tessel: error: rank R of N: message` on stderr and ends every rank of the job
// with `code` (MPI_Abort); returns only when MPI is not active.
void abort_job(const std::string& message, int code);

// A barrier that sleeps while it waits (MPI_Ibarrier, tested every 200 us): ranks that
// wait for rank 0's work (the reference, a calibration) leave it the cores, where a
// blocking MPI call would spin on them.
void lazy_barrier();

// Seconds of steady_clock (CLOCK_MONOTONIC) since its epoch.
[[nodiscard]] double now_s();

// Collective: each rank's clock offset against rank 0's (rank r's clock reads
// offset[r] seconds ahead of rank 0's), estimated by ping-pong: 16 round trips per rank,
// the one with the shortest round trip kept, its midpoint taken as the moment rank r
// read its clock (error at most half that round trip). Every rank gets the vector.
[[nodiscard]] std::vector<double> clock_offsets();

// Point-to-point figures between rank 0 and every other rank (ping-pong, blocking
// MPI_Send / MPI_Recv): one-way latency of an 8-byte message and bandwidth of large
// ones, medians over `rounds`. Collective; the figures are valid on rank 0.
struct P2pFigures {
  double latency_s = 0;       // median over ranks of each rank's median one-way time
  double bytes_per_s = 0;     // median over ranks of each rank's bandwidth
  std::int64_t bytes = 0;     // message size of the bandwidth probe
  std::vector<double> latency_by_rank_s;    // [0] unused
  std::vector<double> bytes_per_s_by_rank;  // [0] unused
};
[[nodiscard]] P2pFigures measure_p2p(std::int64_t bytes, int rounds);

}  // namespace tessel::runtime::mpi
