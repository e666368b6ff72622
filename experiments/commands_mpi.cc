// The MPI backend's part of the CLI (see backend.h): compiled into every build, with the
// MPI calls only where the backend was built.
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "experiments/backend.h"

#ifdef TESSEL_HAVE_MPI
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

int error_exit(int code, const std::string& line, const std::exception*) {
  std::cerr << line << '\n';
  return code;
}

#endif

}  // namespace tessel::cli
