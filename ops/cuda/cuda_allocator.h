// CudaAllocator: a caching, stream-ordered allocator of device memory for one GPU.
//
// Blocks are rounded up to a size class (powers of two up to 1 MiB, then multiples of 2 MiB)
// and come from cudaMalloc only on a miss; Deallocate puts a block back on its class's free
// list at once, and the next Allocate of that class hands it out again. That is safe because
// the allocator belongs to one stream (the device's backend stream, see cuda_backend.h): work
// queued on the freed block runs before any work the next owner queues on the same stream.
// REQUIRES of users: a block is only used by work on that stream, or by work the user has
// synchronized with it before freeing the block.
//
// Large requests (over 1 MiB) may be served by a cached block up to 1/8 larger than their
// class, so slowly varying batch sizes keep reusing memory. When cudaMalloc reports out of
// memory the allocator waits for the stream, returns every cached block to the driver and tries
// once more; a second failure is a ResourceExhausted Status with the allocator's statistics.
//
// Statistics follow core::AllocatorStats: bytes_in_use counts the size of the blocks handed
// out, bytes_reserved what is held from cudaMalloc, num_system_allocs the cudaMalloc calls.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/allocator.h"

namespace cavs::ops::cuda {

class CudaAllocator final : public core::Allocator {
 public:
  // Allocates on device `ordinal`; frees are ordered on `stream` (not owned).
  CudaAllocator(int ordinal, cudaStream_t stream);
  ~CudaAllocator() override;
  CudaAllocator(const CudaAllocator&) = delete;
  CudaAllocator& operator=(const CudaAllocator&) = delete;

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Deallocate(void* p, size_t bytes) override;
  core::AllocatorStats stats() const override;
  void ResetPeak() override;
  // Waits for the stream, then cudaFree()s every cached block.
  void ReleaseCached() override;

  // The size class a request of `bytes` is served from.
  static size_t RoundUp(size_t bytes);

 private:
  // Takes a cached block of at least `size` bytes (see the class comment), or nullptr.
  void* TakeCachedLocked(size_t size, size_t* block_size);
  void ReleaseCachedLocked();

  const int ordinal_;
  cudaStream_t stream_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;        // block size -> cached blocks
  absl::flat_hash_map<void*, size_t> live_;  // block -> its size, for blocks handed out
  core::AllocatorStats stats_;
};

}  // namespace cavs::ops::cuda
