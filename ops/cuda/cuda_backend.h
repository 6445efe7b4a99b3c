// CudaBackend: the core::Backend of one GPU (Device::Cuda(n)).
//
// Each device gets one backend for the life of the process, created at its first use: it owns
// one non-blocking stream, on which every copy, kernel and cuBLAS call of that device is
// queued, and a CudaAllocator ordered on that stream. The backend is part of the CUDA device
// plug-in (ops/cuda/cuda_plugin.h); GetCudaBackend answers with a FailedPrecondition Status,
// and prints nothing, where the machine has no driver or device, and with InvalidArgument for
// an ordinal beyond the device count.
//
// Host memory: CopyFromHost returns once `src` may be reused (pageable memory is staged by the
// driver; for memory from PinnedAlloc it waits for the copy). CopyToHost waits for the copy.
// For the executor's one-transfer plan upload, PinnedStaging keeps a pinned buffer and copies
// from it asynchronously, waiting only before the buffer is overwritten.
//
// Thread-safety: GetCudaBackend, PinnedAlloc and PinnedFree may be called concurrently; a
// backend's copies may be queued from several threads (the stream orders them).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/backend.h"
#include "core/device.h"
#include "ops/cuda/cuda_allocator.h"
#include "ops/cuda/cuda_device_guard.h"

namespace cavs::ops::cuda {

class PinnedStaging;

// The number of CUDA devices; 0 (not an error) where the machine has no driver or device.
int CudaDeviceCount();

class CudaBackend final : public core::Backend {
 public:
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  core::Device device() const override { return core::Device::Cuda(ordinal_); }
  core::Allocator* allocator() override { return &allocator_; }
  absl::Status CopyFromHost(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyWithin(void* dst, const void* src, size_t bytes) override;
  absl::Status SetZero(void* dst, size_t bytes) override;
  absl::Status Synchronize() override;
  // Pinned memory (a PinnedStaging): a CopyFromHost from its start is queued without waiting.
  absl::StatusOr<void*> HostStaging(size_t bytes) override;
  // Queued copies into a pinned block and an event: returns without waiting. The blocks are
  // kept for reuse (cudaHostAlloc costs more than a batch); Wait and the Readback's destructor
  // wait for the event.
  absl::StatusOr<std::unique_ptr<core::Readback>> StartReadback(
      const std::vector<core::ReadbackPart>& parts) override;

  // A pinned block and its event, for a readback (internal to StartReadback).
  struct ReadbackBlock {
    std::shared_ptr<void> host;  // PinnedBlock's
    size_t capacity = 0;
    cudaEvent_t done = nullptr;
  };
  void ReturnReadbackBlock(const ReadbackBlock& block);

  // Queues a host-to-device copy from pinned memory and returns at once. REQUIRES: `src`
  // (from PinnedAlloc) stays unchanged until the stream has passed the copy.
  [[nodiscard]] absl::Status CopyFromPinnedAsync(void* dst, const void* src, size_t bytes);

  int ordinal() const { return ordinal_; }
  // The stream every op of this device is queued on.
  cudaStream_t stream() const { return stream_; }
  CudaAllocator* cuda_allocator() { return &allocator_; }

  // Makes this backend's device current for the guard's scope.
  [[nodiscard]] absl::Status MakeCurrent(CudaDeviceGuard& guard) const {
    return guard.Set(ordinal_);
  }

 private:
  friend absl::StatusOr<CudaBackend*> GetCudaBackend(int ordinal);
  CudaBackend(int ordinal, cudaStream_t stream);

  const int ordinal_;
  cudaStream_t stream_;
  CudaAllocator allocator_;
  std::unique_ptr<PinnedStaging> staging_;  // HostStaging's buffer, created on first use
  std::mutex readback_mu_;
  std::vector<ReadbackBlock> readback_free_;  // blocks of finished readbacks
};

// The backend of cuda:`ordinal`, created on first use and never destroyed.
[[nodiscard]] absl::StatusOr<CudaBackend*> GetCudaBackend(int ordinal);

// Page-locked host memory (cudaHostAlloc), for asynchronous uploads. PinnedFree takes only
// pointers from PinnedAlloc (nullptr is ignored). IsPinned says whether `p` lies in a live one.
[[nodiscard]] absl::StatusOr<void*> PinnedAlloc(size_t bytes);
void PinnedFree(void* p);
bool IsPinned(const void* p);

// A block of at least `bytes` from the process's pool of page-locked memory (PinnedAlloc's,
// pooled by power-of-two size class, since allocating them costs milliseconds), back in the pool
// when the last copy of the pointer goes; nullptr once the CUDA runtime had none to give. The
// plug-in's pinned host memory (core::PinnedHostBlock(kCuda, ...)). Thread-safe.
std::shared_ptr<void> PinnedBlock(size_t bytes);

// A growable pinned staging buffer for one upload at a time (e.g. a batch's plan):
//   CAVS_ASSIGN_OR_RETURN(void* host, staging.Acquire(bytes));  // waits for the last upload
//   ... fill host ...
//   CAVS_RETURN_IF_ERROR(staging.Upload(device_dst, bytes));     // returns at once
class PinnedStaging {
 public:
  explicit PinnedStaging(CudaBackend* backend) : backend_(backend) {}
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // A host buffer of at least `bytes`, once the previous Upload has been read by the device.
  [[nodiscard]] absl::StatusOr<void*> Acquire(size_t bytes);
  // Queues the copy of the buffer's first `bytes` to `dst` on the backend's stream.
  // REQUIRES: bytes <= the size of the last Acquire.
  [[nodiscard]] absl::Status Upload(void* dst, size_t bytes);
  // The buffer (nullptr before the first Acquire).
  const void* data() const { return host_; }

 private:
  CudaBackend* backend_;
  void* host_ = nullptr;
  size_t capacity_ = 0;
  cudaEvent_t done_ = nullptr;  // recorded after the last upload
  bool pending_ = false;
};

}  // namespace cavs::ops::cuda
