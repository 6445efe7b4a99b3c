// Helpers for the tests that run under mpirun: the world communicator shared by a test binary,
// and the stand-in device of synchronizer_test.cc for device buffers without a GPU.
#pragma once

#include <cstring>
#include <memory>

#include "absl/time/time.h"
#include "core/backend.h"
#include "core/status.h"
#include "distributed/communicator.h"

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

// "cuda:0" backed by host memory (see tests/core/checkpoint_test.cc): device code paths without
// a GPU. Registered by UseHostMemoryDevice() when no real CUDA backend is present.
class HostMemoryDevice final : public core::Backend {
 public:
  core::Device device() const override { return core::Device::Cuda(0); }
  core::Allocator* allocator() override { return core::CpuAllocator::Global(); }
  absl::Status CopyFromHost(void* dst, const void* src, size_t bytes) override {
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    return CopyFromHost(dst, src, bytes);
  }
  absl::Status CopyWithin(void* dst, const void* src, size_t bytes) override {
    return CopyFromHost(dst, src, bytes);
  }
  absl::Status SetZero(void* dst, size_t bytes) override {
    std::memset(dst, 0, bytes);
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }
};

// False if a real CUDA backend is linked (then the stand-in is not needed and not registered).
inline bool UseHostMemoryDevice() {
  static const bool registered = [] {
    if (core::DeviceAvailable(core::DeviceType::kCuda)) return false;
    static HostMemoryDevice* device = new HostMemoryDevice();
    core::RegisterBackendFactory(core::DeviceType::kCuda,
                                 [](int) -> absl::StatusOr<core::Backend*> { return device; });
    return true;
  }();
  return registered;
}

}  // namespace cavs::distributed::testing
