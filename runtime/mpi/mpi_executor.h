#pragma once
// MpiExecutor: one task graph run by every rank of an MPI job (mpirun -np R tessel ...
// --backend mpi). Rank r owns the contiguous devices [r·N/R, (r+1)·N/R) of the N logical
// devices and runs the CPU backend's workers for them (CpuExecutor with a RemoteLink):
// a move inside a rank stays a copy; a move between ranks is packed by its source's
// worker and sent by a communication thread with non-blocking MPI point-to-point
// (MPI_Isend / MPI_Irecv, tagged by task id, on a duplicate of MPI_COMM_WORLD), received
// straight into the destination buffer, so no worker ever waits on MPI. The thread sleeps
// on a doorbell that the sending rank rings (doorbell.h) and polls MPI only while a
// transfer is under way or shortly after one. Under `bsp` a phase ends with an
// MPI_Ibarrier that every rank enters when it has finished the phase. The ranks start
// their first tasks together, once every rank has placed its buffers.
//
// Every rank must be given the same graph, decomposition and inputs: at the start of
// each run the ranks exchange a fingerprint of them and stop with an error naming the
// first rank that differs (CollectiveError). More ranks than devices is an error too.
// Each rank places only its own devices' input blocks. After the run the outputs are
// gathered to rank 0; the timelines too, with every rank's clock offset (ping-pong,
// measured once per executor) removed, so rank 0's RunResult holds every device's spans
// on one clock (a move between ranks: from its packing on the source rank to its
// arrival). Other ranks return no outputs and no spans (reports() is false there).
//
// A task that throws, a rank that cannot place its buffers, or a failing transfer ends
// the whole job (mpi::abort_job: `tessel: error: rank R of N: cpu executor: task T
// (...) failed: ...`, then MPI_Abort); a killed rank is reported by mpirun, which ends
// the others. For tests, TESSEL_MPI_FAULT=RANK:TASK makes that rank's task throw and
// TESSEL_MPI_FAULT=RANK:kill makes that rank kill itself (SIGKILL) at its first task;
// TESSEL_MPI_FAULT=0:setup kills rank 0 while it makes the doorbells' segment (doorbell.h).

#include <memory>

#include "runtime/cpu_executor.h"
#include "runtime/executor.h"

namespace tessel::runtime {

class MpiLink;

class MpiExecutor final : public Executor {
 public:
  // Initialises MPI if needed (mpi::ensure_initialized).
  explicit MpiExecutor(Policy policy, bool pin_threads = true);
  ~MpiExecutor() override;
  [[nodiscard]] std::string name() const override { return "mpi"; }
  [[nodiscard]] RunResult run(const Graph& g, const TaskGraph& tg, const TensorMap& inputs) override;
  // True on rank 0 only: it holds the outputs and the merged timeline.
  [[nodiscard]] bool reports() const { return rank_ == 0; }
  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int ranks() const { return ranks_; }
  // The devices rank r owns for a graph of `devices` devices: [first, last).
  [[nodiscard]] static std::pair<int, int> devices_of(int rank, int ranks, int devices);
  // Each rank's clock offset against rank 0's (seconds), as last estimated.
  [[nodiscard]] const std::vector<double>& clock_offsets() const { return offsets_; }

 private:
  Policy policy_;
  int rank_ = 0;
  int ranks_ = 1;
  std::vector<double> offsets_;
  std::unique_ptr<MpiLink> link_;
  std::unique_ptr<CpuExecutor> cpu_;
};

// A fingerprint (FNV-1a, 64 bits) of a graph, its task graph and its inputs: equal on
// every rank that was given the same command.
[[nodiscard]] std::uint64_t run_fingerprint(const Graph& g, const TaskGraph& tg, const TensorMap& inputs);

}  // namespace tessel::runtime
