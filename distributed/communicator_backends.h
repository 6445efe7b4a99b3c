// Internal to distributed/: the one list of the communicator backends built into cavs.
// RegisterBuiltinCommunicators registers each of them (RegisterCommunicatorBackend, through the
// backend's own Register*Communicator): "single" always, "mpi" with CAVS_WITH_MPI, "nccl" with
// CAVS_WITH_NCCL and MPI; a backend the build lacks is registered as a factory whose error says
// how to configure cavs with it. MakeCommunicator calls it once, before its first lookup, so the
// factory itself names no backend. A new backend adds its registration here.
//
// Thread-safety: called once (std::call_once in MakeCommunicator).
#pragma once

namespace cavs::distributed::internal {

void RegisterBuiltinCommunicators();

}  // namespace cavs::distributed::internal
