#pragma once
// Executors by backend name for the CLI (run, einsum, compare, calibrate), and the CUDA
// backend's options. `--backend cuda` works in a build with the CUDA backend
// (TESSEL_HAVE_CUDA) on a machine with a GPU; elsewhere it is a user error that says
// which of the two is missing.

#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json_fwd.hpp>

#include "core/machine.h"
#include "experiments/sweep.h"
#include "runtime/cpu_executor.h"
#include "runtime/executor.h"

namespace tessel::cli {

// --gpus, --moves, --launch, --comm-priority, --tf32: options of the CUDA backend.
struct CudaCliOptions {
  int gpus = 0;
  std::string moves = "copy";
  std::string launch = "graph";
  bool unmarked = false;  // --unmarked: CudaOptions::unmarked_run
  std::string comm_priority;  // empty: normal (compare: and the machine's for the simulation)
  bool tf32 = false;
  void add(CLI::App& app);
  // run and einsum: an Error naming the first of these options given on `cmd` with a
  // backend other than cuda, where nothing uses it (as --copy-lane thread is refused off
  // the cpu backend). compare does not call it: it simulates --comm-priority on every
  // backend.
  static void check_backend(const CLI::App& cmd, const std::string& backend);
};

// True when this build has the CUDA backend.
[[nodiscard]] bool cuda_backend_built();

// A CUDA executor; Error when the build has no CUDA backend or no GPU is usable.
[[nodiscard]] std::unique_ptr<runtime::Executor> make_cuda_executor(runtime::Policy policy, const CudaCliOptions& o);

// `tessel calibrate --backend cuda`: measures, returns the calibration as JSON and the
// machine to write.
[[nodiscard]] nlohmann::json calibrate_cuda_backend(int devices, int gpus, double seconds_per_point, Machine* machine);
// `tessel calibrate --backend cuda --overlap`: the overlap micro-benchmark
// (runtime/cuda/cuda_overlap.h); sets machine->interference to the measured rows and
// returns the measurements as JSON.
[[nodiscard]] nlohmann::json calibrate_cuda_overlap_backend(double seconds_per_point, Machine* machine);

// Per task of `tg`: seconds per call of its compute kernel on the GPU (-1 for other
// tasks) and its chip share, for compare's profiled compute model; `exec` must be a CUDA
// executor.
[[nodiscard]] runtime::KernelProfile profile_cuda_kernels(runtime::Executor& exec, const Graph& g, const TaskGraph& tg,
                                                       const runtime::TensorMap& inputs);

// The MPI backend (runtime/mpi/, commands_mpi.cc): `--backend mpi` in a build with MPI
// (TESSEL_HAVE_MPI), launched as `mpirun -np R tessel ...` (a process started without
// mpirun is a job of one rank).
[[nodiscard]] bool mpi_backend_built();
// An MPI executor (initialises MPI); Error when the build has no MPI backend.
[[nodiscard]] std::unique_ptr<runtime::Executor> make_mpi_executor(runtime::Policy policy);
// False on the ranks of an MPI job other than rank 0: they run their part of every run
// but check, print and write nothing (rank 0 holds the outputs and the timeline).
[[nodiscard]] bool reports_results(const runtime::Executor& exec);
// The rank and size of the MPI job this process belongs to: (0, 1) when MPI is not
// active (or not built).
[[nodiscard]] std::pair<int, int> mpi_rank_and_size();
// --memory-cap with --backend mpi in a job of several ranks (run, compare): refused before
// anything is lowered or planned, on every rank alike (rank 0 prints it; every rank exits
// non-zero), since a capped graph cannot run split over processes (the CPU executor
// refuses it too). Nothing otherwise.
void check_mpi_memory_cap(const std::string& backend, bool capped);
// `tessel calibrate --backend mpi`, collective: rank 0 calibrates the CPU backend with
// `devices` workers (0: every core) while the other ranks wait without spinning, then
// every rank measures point-to-point latency and bandwidth against rank 0; the machine
// is the CPU's with explicit routes between devices of different ranks through each
// rank's MPI links. True on rank 0 (machine and JSON filled); false elsewhere.
[[nodiscard]] bool calibrate_mpi_backend(int devices, double seconds_per_point, int rounds, Machine* machine,
                                         nlohmann::json* report);
// `mpirun -np R tessel sweep ...` (an MPI job of several ranks, known from the launcher's
// environment: OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_SIZE): on rank 0 sets
// `options.distribute` so that run_sweep splits the points still to run over the ranks
// (point k of them on rank k mod R; every row written by rank 0 as it arrives) and
// returns true; on the other ranks runs their share and returns false (they write
// nothing). Without such a job: true, `options` untouched. `jobs_given` false: each rank
// takes its share of the cores.
[[nodiscard]] bool sweep_over_ranks(const experiments::SweepSpec& spec, experiments::SweepOptions& options,
                                    bool jobs_given);
// main()'s end for an error: prints `line` and returns `code`, except in an MPI job of
// several ranks, where an error all ranks share is printed by rank 0 only and any
// other ends the whole job naming the rank (MPI_Abort).
[[nodiscard]] int error_exit(int code, const std::string& line, const std::exception* error);

}  // namespace tessel::cli
