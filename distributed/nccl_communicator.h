// The NCCL communicator: GPU buffers on this rank's device (local rank modulo the device count),
// collectives queued on a private CUDA stream and completed through a CUDA event that Work polls
// against the timeout (a stuck peer aborts the NCCL communicator and becomes DeadlineExceeded).
// Bootstrapped over MPI: rank 0's ncclUniqueId is broadcast with an MPI communicator, and the
// NCCL communicator is initialized in nonblocking mode so that a missing peer times out.
// AllGatherV is a group of broadcasts, GatherV a group of sends and receives; Send/Recv ignore
// the tag (NCCL orders messages per pair of ranks). Before queuing, the device's cavs stream is
// synchronized, so that gradients computed there are complete.
//
// Only present when the build has NCCL, CUDA and MPI (CAVS_WITH_NCCL), where it is
// MakeCommunicator's "nccl" (distributed/communicator_backends.cc registers it); it bootstraps
// through MakeCommunicator("mpi"). No NCCL or CUDA type appears in this header. Thread-safety:
// one thread at a time.
#pragma once

namespace cavs::distributed {

// Registers the backend "nccl" (RegisterCommunicatorBackend).
void RegisterNcclCommunicator();

}  // namespace cavs::distributed
