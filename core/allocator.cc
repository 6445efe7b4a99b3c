#include "core/allocator.h"

#include <bit>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace cavs::core {

namespace {
constexpr size_t kAlignment = 64;
constexpr size_t kSmallest = 256;
}  // namespace

CpuAllocator::~CpuAllocator() { ReleaseCached(); }

// Classes: powers of two up to 1 MiB, then multiples of 1 MiB, so big buffers waste < 1 MiB.
size_t CpuAllocator::RoundUp(size_t bytes) {
  constexpr size_t kMiB = size_t{1} << 20;
  if (bytes <= kSmallest) return kSmallest;
  if (bytes <= kMiB) return std::bit_ceil(bytes);
  return (bytes + kMiB - 1) / kMiB * kMiB;
}

absl::StatusOr<void*> CpuAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  size_t size = RoundUp(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* p = nullptr;
  // Large requests take the best-fitting cached block up to 1/8 larger: batches of slightly
  // different sizes reuse each other's blocks instead of faulting in fresh pages every step.
  const size_t limit = size > (size_t{1} << 20) ? size + size / 8 : size;
  auto it = free_.lower_bound(size);
  while (it != free_.end() && it->second.empty() && it->first <= limit) ++it;
  if (it != free_.end() && !it->second.empty() && it->first <= limit) {
    p = it->second.back();
    it->second.pop_back();
    size = it->first;
  } else {
    p = std::aligned_alloc(kAlignment, size);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "out of host memory allocating ", size, " bytes (", stats_.bytes_in_use, " in use)"));
    }
    stats_.bytes_reserved += static_cast<int64_t>(size);
    ++stats_.num_system_allocs;
  }
  ++stats_.num_allocs;
  block_size_[p] = size;
  stats_.bytes_in_use += static_cast<int64_t>(size);
  if (stats_.bytes_in_use > stats_.peak_bytes_in_use) {
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }
  return p;
}

void CpuAllocator::Deallocate(void* p, size_t bytes) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = block_size_.find(p);
  CAVS_CHECK(it != block_size_.end(), "Deallocate of a block this allocator did not hand out");
  const size_t size = it->second;
  CAVS_CHECK(size >= RoundUp(bytes), "Deallocate with a larger size than allocated");
  block_size_.erase(it);
  stats_.bytes_in_use -= static_cast<int64_t>(size);
  free_[size].push_back(p);
}

AllocatorStats CpuAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CpuAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

void CpuAllocator::ReleaseCached() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) std::free(p);
    stats_.bytes_reserved -= static_cast<int64_t>(size * blocks.size());
    blocks.clear();
  }
}

CpuAllocator* CpuAllocator::Global() {
  static CpuAllocator* allocator = new CpuAllocator();  // never destroyed: outlives tensors
  return allocator;
}

}  // namespace cavs::core
