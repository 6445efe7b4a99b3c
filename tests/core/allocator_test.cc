#include "core/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace cavs::core {
namespace {

TEST(CpuAllocatorTest, AccountsBytesAndPeak) {
  CpuAllocator a;
  void* p = *a.Allocate(1000);  // class 1024
  void* q = *a.Allocate(100);   // class 256
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(a.stats().bytes_in_use, 1024 + 256);
  a.Deallocate(q, 100);
  EXPECT_EQ(a.stats().bytes_in_use, 1024);
  EXPECT_EQ(a.stats().peak_bytes_in_use, 1024 + 256);
  a.ResetPeak();
  EXPECT_EQ(a.stats().peak_bytes_in_use, 1024);
  a.Deallocate(p, 1000);
  EXPECT_EQ(a.stats().bytes_in_use, 0);
}

TEST(CpuAllocatorTest, ReusesFreedBlocks) {
  CpuAllocator a;
  void* p = *a.Allocate(5000);
  a.Deallocate(p, 5000);
  void* q = *a.Allocate(4097);  // same class (8192)
  EXPECT_EQ(p, q);
  EXPECT_EQ(a.stats().num_system_allocs, 1);
  EXPECT_EQ(a.stats().num_allocs, 2);
  a.Deallocate(q, 4097);
  a.ReleaseCached();
  EXPECT_EQ(a.stats().bytes_reserved, 0);
}

TEST(CpuAllocatorTest, SizeClasses) {
  EXPECT_EQ(CpuAllocator::RoundUp(1), 256u);
  EXPECT_EQ(CpuAllocator::RoundUp(257), 512u);
  EXPECT_EQ(CpuAllocator::RoundUp((1u << 20) + 1), 2u << 20);
  EXPECT_EQ(CpuAllocator::RoundUp((3u << 20) - 5), 3u << 20);
  EXPECT_EQ(*CpuAllocator().Allocate(0), nullptr);
}

}  // namespace
}  // namespace cavs::core

namespace cavs::core {
namespace {

TEST(CpuAllocatorTest, LargeRequestsReuseSlightlyLargerBlocks) {
  CpuAllocator a;
  constexpr size_t kMiB = size_t{1} << 20;
  void* p = *a.Allocate(40 * kMiB);
  a.Deallocate(p, 40 * kMiB);
  void* q = *a.Allocate(38 * kMiB);  // 40 <= 38 + 38/8: the cached block serves it
  EXPECT_EQ(p, q);
  EXPECT_EQ(a.stats().num_system_allocs, 1);
  EXPECT_EQ(a.stats().bytes_in_use, static_cast<int64_t>(40 * kMiB));
  a.Deallocate(q, 38 * kMiB);
  void* r = *a.Allocate(20 * kMiB);  // far smaller: a fresh block, the big one stays cached
  EXPECT_NE(r, p);
  EXPECT_EQ(a.stats().num_system_allocs, 2);
  a.Deallocate(r, 20 * kMiB);
  void* s = *a.Allocate(300);  // small classes are exact
  void* t = *a.Allocate(600);
  a.Deallocate(s, 300);
  void* u = *a.Allocate(400);
  EXPECT_NE(u, t);
  a.Deallocate(t, 600);
  a.Deallocate(u, 400);
  EXPECT_EQ(a.stats().bytes_in_use, 0);
}

}  // namespace
}  // namespace cavs::core
