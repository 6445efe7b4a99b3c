// Helpers for the tests that run under mpirun: the world communicator shared by a test binary,
// and the stand-in device of synchronizer_test.cc for device buffers without a GPU.
#pragma once

#include <cstring>
#include <memory>

#include "absl/time/time.h"
#include "core/backend.h"
#include "core/status.h"
#include "distributed/communicator.h"
#include "tests/core/host_memory_device.h"

namespace cavs::distributed::testing {

// An MPI communicator over all ranks, made on first use and kept for the process. Its timeout
// turns a test that leaves the ranks out of step into a failure instead of a hang.
inline Communicator& World() {
  static Communicator* world = [] {
    absl::StatusOr<std::unique_ptr<Communicator>> comm =
        MakeCommunicator("mpi", {absl::Seconds(10)});
    CAVS_CHECK(comm.ok(), comm.status().ToString());
    return comm->release();
  }();
  return *world;
}

// A fresh MPI communicator with its own timeout (for tests that break it on purpose).
inline std::unique_ptr<Communicator> FreshComm(absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator("mpi", {timeout});
  CAVS_CHECK(comm.ok(), comm.status().ToString());
  return *std::move(comm);
}

// False if a real CUDA backend is linked (then the host-memory stand-in is not registered).
inline bool UseHostMemoryDevice() { return core::test_devices::UseHostMemoryDevice() != nullptr; }

}  // namespace cavs::distributed::testing
