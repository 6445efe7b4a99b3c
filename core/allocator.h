// Allocators and their statistics.
//
// CpuAllocator is a caching arena: blocks are 64-byte aligned and rounded up to a size class;
// a freed block goes back to its class's free list and is handed out again, so a training
// loop whose batches have similar sizes stops calling the system allocator after a few steps.
// `bytes_in_use` counts the requested (rounded) bytes of live blocks; `peak_bytes_in_use` its
// high-water mark since the last ResetPeak(); `bytes_reserved` what is held from the system.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

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
  std::map<size_t, std::vector<void*>> free_;  // size class -> cached blocks
  AllocatorStats stats_;
};

}  // namespace cavs::core
