// The single-process communicator: world size 1, rank 0. Reductions and broadcasts leave the
// buffer as it is, gathers copy send into recv, and a Recv completes once a Send with the same
// tag has been started on the same communicator (messages to oneself, in order per tag).
// Buffers may live on any device. Used when a job runs without a launcher, and as the
// reference the other backends are tested against.
//
// Thread-safety: as any communicator (one thread at a time).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "distributed/communicator.h"

namespace cavs::distributed {

[[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> MakeSingleCommunicator(
    const CommOptions& options = {});

// Registers MakeSingleCommunicator as the backend "single" (RegisterCommunicatorBackend).
void RegisterSingleCommunicator();

}  // namespace cavs::distributed
