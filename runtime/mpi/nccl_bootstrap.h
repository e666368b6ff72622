#pragma once
// The bootstrap NCCL needs across processes (one process per GPU): rank 0 creates the
// communicator's unique id (ncclGetUniqueId) and MPI_Bcast gives it to every rank, which
// then calls ncclCommInitRank(&comm, size, id, rank). Built only with the CUDA backend
// (NCCL found); it has been compiled but never run here (no GPU on the development
// machine).

#include <array>

namespace tessel::runtime::mpi {

// NCCL_UNIQUE_ID_BYTES: an ncclUniqueId's bytes, to memcpy into one.
using NcclId = std::array<char, 128>;

// Collective over MPI_COMM_WORLD (initialising MPI if needed): rank 0's ncclGetUniqueId,
// the same on every rank on return. Error when this build has no NCCL or NCCL fails.
[[nodiscard]] NcclId nccl_unique_id();

}  // namespace tessel::runtime::mpi
