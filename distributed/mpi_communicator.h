// The MPI communicator: a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, every operation
// a nonblocking MPI call (MPI_Iallreduce, MPI_Iallgatherv, MPI_Isend, ...) polled with MPI_Test
// against the communicator's timeout, so that a dead or stuck peer becomes DeadlineExceeded
// instead of a hang. Host buffers are used in place; device buffers are staged through
// page-locked host memory (pageable if none can be had) and copied back on completion.
// float16/bfloat16 sums use MPI operators defined here (accumulating each pair in float32).
//
// MPI is initialized (MPI_THREAD_SERIALIZED) on the first call unless the program did it, and
// then finalized at process exit. Operations abandoned after a timeout stay posted (MPI cannot
// cancel a collective); their buffers are kept until exit, and MPI_Finalize still returns when
// the peer is gone (Open MPI 4.1).
//
// Only present when the build has MPI (CAVS_WITH_MPI), where it is MakeCommunicator's "mpi"
// (distributed/communicator_backends.cc registers it). Thread-safety: one thread at a time.
#pragma once

namespace cavs::distributed {

// Registers the backend "mpi" (RegisterCommunicatorBackend).
void RegisterMpiCommunicator();

}  // namespace cavs::distributed
