#include "runtime/mpi/nccl_bootstrap.h"

#include <mpi.h>

#include <cstring>

#include "core/error.h"
#include "runtime/mpi/mpi_session.h"

#ifdef TESSEL_MPI_WITH_NCCL
#include <nccl.h>
static_assert(sizeof(ncclUniqueId) == sizeof(tessel::runtime::mpi::NcclId), "NCCL_UNIQUE_ID_BYTES changed");
#endif

namespace tessel::runtime::mpi {

NcclId nccl_unique_id() {
  ensure_initialized();
  NcclId id{};
#ifdef TESSEL_MPI_WITH_NCCL
  // Rank 0 reports a failure to every rank through the broadcast (first byte of a flag),
  // so that no rank waits for an id that will not come.
  int ok = 1;
  if (rank() == 0) {
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r == ncclSuccess)
      std::memcpy(id.data(), &u, sizeof u);
    else
      ok = 0;
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) fail("NCCL bootstrap: ncclGetUniqueId failed on rank 0");
  MPI_Bcast(id.data(), static_cast<int>(id.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
#else
  fail("NCCL bootstrap: this build has no NCCL (the CUDA backend was not built)");
#endif
  return id;
}

}  // namespace tessel::runtime::mpi
