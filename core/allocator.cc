#include "core/allocator.h"

#include <bit>
#include <cstdlib>

#include "absl/strings/str_cat.h"

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
  const size_t size = RoundUp(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* p = nullptr;
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
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
  stats_.bytes_in_use += static_cast<int64_t>(size);
  if (stats_.bytes_in_use > stats_.peak_bytes_in_use) {
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }
  return p;
}

void CpuAllocator::Deallocate(void* p, size_t bytes) {
  if (p == nullptr) return;
  const size_t size = RoundUp(bytes);
  std::lock_guard<std::mutex> lock(mu_);
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
