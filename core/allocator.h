// Allocators and their statistics.
//
// CpuAllocator is a caching arena: blocks are 64-byte aligned and rounded up to a size class;
// a freed block goes back to its class's free list and is handed out again, so a training
// loop whose batches have similar sizes stops calling the system allocator after a few steps.
// A request over 1 MiB may be served by a cached block up to 1/8 larger (best fit), so that
// batches of slightly different sizes reuse each other's blocks. `bytes_in_use` counts the
// sizes of the live blocks; `peak_bytes_in_use` its
// high-water mark since the last ResetPeak(); `bytes_reserved` what is held from the system.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace cavs::core {

struct AllocatorStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;
  int64_t bytes_reserved = 0;
  int64_t num_allocs = 0;         // Allocate() calls that succeeded
  int64_t num_system_allocs = 0;  // of those, how many reached the system allocator
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns at least `bytes` bytes, 64-byte aligned (nullptr for zero bytes).
  [[nodiscard]] virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  // REQUIRES: `p` came from Allocate(bytes) on this allocator.
  virtual void Deallocate(void* p, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void ResetPeak() = 0;
  // Returns cached, unused blocks to the system.
  virtual void ReleaseCached() {}
};

class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() = default;
  ~CpuAllocator() override;
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Deallocate(void* p, size_t bytes) override;
  AllocatorStats stats() const override;
  void ResetPeak() override;
  void ReleaseCached() override;

  // The size class a request of `bytes` is served from.
  static size_t RoundUp(size_t bytes);

  // The process-wide CPU allocator.
  static CpuAllocator* Global();

 private:
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;      // size class -> cached blocks
  absl::flat_hash_map<void*, size_t> block_size_;  // live block -> its size class
  AllocatorStats stats_;
};

}  // namespace cavs::core
