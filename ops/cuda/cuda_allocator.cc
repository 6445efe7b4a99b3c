#include "ops/cuda/cuda_allocator.h"

#include <bit>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cuda/cuda_device_guard.h"
#include "ops/cuda/cuda_status.h"

namespace cavs::ops::cuda {

namespace {
constexpr size_t kSmallest = 512;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kLargeStep = 2 * kMiB;
}  // namespace

CudaAllocator::CudaAllocator(int ordinal, cudaStream_t stream)
    : ordinal_(ordinal), stream_(stream) {}

CudaAllocator::~CudaAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseCachedLocked();
}

size_t CudaAllocator::RoundUp(size_t bytes) {
  if (bytes <= kSmallest) return kSmallest;
  if (bytes <= kMiB) return std::bit_ceil(bytes);
  return (bytes + kLargeStep - 1) / kLargeStep * kLargeStep;
}

void* CudaAllocator::TakeCachedLocked(size_t size, size_t* block_size) {
  auto it = free_.lower_bound(size);
  if (it == free_.end()) return nullptr;
  // Small classes match exactly; a large request accepts a block up to 1/8 larger.
  const size_t limit = size <= kMiB ? size : size + size / 8;
  if (it->first > limit) return nullptr;
  void* p = it->second;
  *block_size = it->first;
  free_.erase(it);
  return p;
}

absl::StatusOr<void*> CudaAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  size_t size = RoundUp(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* p = TakeCachedLocked(size, &size);
  if (p == nullptr) {
    CudaDeviceGuard guard;
    CAVS_RETURN_IF_ERROR(guard.Set(ordinal_));
    cudaError_t err = cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear it: the retry decides
      ReleaseCachedLocked();
      err = cudaMalloc(&p, size);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      const absl::Status s = CudaStatus(err, "cudaMalloc", __FILE__, __LINE__);
      return absl::Status(
          s.code(),
          absl::StrCat("cuda:", ordinal_, ": allocating ", size, " bytes (", stats_.bytes_in_use,
                       " in use, ", stats_.bytes_reserved, " reserved): ", s.message()));
    }
    stats_.bytes_reserved += static_cast<int64_t>(size);
    ++stats_.num_system_allocs;
  }
  live_[p] = size;
  ++stats_.num_allocs;
  stats_.bytes_in_use += static_cast<int64_t>(size);
  if (stats_.bytes_in_use > stats_.peak_bytes_in_use) {
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }
  return p;
}

void CudaAllocator::Deallocate(void* p, size_t bytes) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  CAVS_CHECK(it != live_.end(), "cuda:", ordinal_, ": Deallocate of a block this allocator ",
             "did not hand out (", bytes, " bytes)");
  CAVS_CHECK(RoundUp(bytes) <= it->second, "cuda:", ordinal_, ": Deallocate of ", bytes,
             " bytes from a block of ", it->second);
  const size_t size = it->second;
  live_.erase(it);
  stats_.bytes_in_use -= static_cast<int64_t>(size);
  free_.emplace(size, p);
}

core::AllocatorStats CudaAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CudaAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

void CudaAllocator::ReleaseCached() {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseCachedLocked();
}

// Errors are ignored here on purpose: this runs from destructors and the OOM path, where a
// failing driver (e.g. at process exit) leaves nothing better to do than drop the cache.
void CudaAllocator::ReleaseCachedLocked() {
  if (free_.empty()) return;
  CudaDeviceGuard guard;
  if (!guard.Set(ordinal_).ok()) return;
  // Freed blocks may still be read by queued work; cudaFree synchronizes the device, but a
  // stream created with cudaStreamNonBlocking is only covered by an explicit wait.
  cudaStreamSynchronize(stream_);
  for (const auto& [size, p] : free_) {
    cudaFree(p);
    stats_.bytes_reserved -= static_cast<int64_t>(size);
  }
  free_.clear();
  cudaGetLastError();
}

}  // namespace cavs::ops::cuda
