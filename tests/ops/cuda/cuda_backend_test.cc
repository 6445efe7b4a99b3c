// The CUDA backend, allocator, status helpers and cuBLAS settings. Tests that need a GPU skip
// where none is present; the Status tests run everywhere.
#include "ops/cuda/cuda_backend.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"
#include "gtest/gtest.h"
#include "ops/cuda/cublas_status.h"
#include "ops/cuda/cuda_allocator.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/kernels.h"
#include "tests/ops/cuda/cuda_test_util.h"

namespace cavs::ops::cuda {
namespace {

using testing::Backend0;
using testing::DeviceArray;

absl::Status FailingCall() {
  CAVS_CUDA_RETURN_IF_ERROR(cudaErrorMemoryAllocation);
  return absl::OkStatus();
}

TEST(CudaStatusTest, NamesErrorCallFileAndLine) {
  const absl::Status s = FailingCall();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("cudaErrorMemoryAllocation"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("in cudaErrorMemoryAllocation at"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("cuda_backend_test.cc:"), absl::string_view::npos) << s;
  EXPECT_TRUE(CAVS_CUDA_STATUS(cudaSuccess).ok());
  EXPECT_EQ(CAVS_CUDA_STATUS(cudaErrorNoDevice).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CAVS_CUDA_STATUS(cudaErrorLaunchFailure).code(), absl::StatusCode::kInternal);
}

TEST(CudaStatusTest, CublasErrors) {
  const absl::Status s = CAVS_CUBLAS_STATUS(CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("CUBLAS_STATUS_INVALID_VALUE"), absl::string_view::npos) << s;
  EXPECT_TRUE(CAVS_CUBLAS_STATUS(CUBLAS_STATUS_SUCCESS).ok());
}

// Runs everywhere: without a GPU, asking for one is an error Status, never a crash.
TEST(CudaBackendTest, MissingDeviceIsAnError) {
  const int count = CudaDeviceCount();
  EXPECT_EQ(core::DeviceAvailable(core::DeviceType::kCuda), count > 0);
  absl::StatusOr<core::Backend*> beyond = core::GetBackend(core::Device::Cuda(count + 3));
  EXPECT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find("cuda:"), absl::string_view::npos);
  EXPECT_FALSE(GetKernels(core::Device::Cuda(count + 3)).ok());
  if (count == 0) {
    EXPECT_EQ(core::GetBackend(core::Device::Cuda(0)).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

TEST(CudaAllocatorTest, ReusesBlocksWithoutCudaMalloc) {
  CAVS_SKIP_WITHOUT_CUDA();
  CudaAllocator allocator(0, Backend0()->stream());
  absl::StatusOr<void*> a = allocator.Allocate(1000);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % 64, 0u);
  EXPECT_EQ(allocator.stats().bytes_in_use, 1024);
  EXPECT_EQ(allocator.stats().num_system_allocs, 1);
  allocator.Deallocate(*a, 1000);
  EXPECT_EQ(allocator.stats().bytes_in_use, 0);
  for (int i = 0; i < 10; ++i) {  // same class: the cached block, no cudaMalloc
    absl::StatusOr<void*> b = allocator.Allocate(900 + i);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(*b, *a);
    allocator.Deallocate(*b, 900 + i);
  }
  core::AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.num_system_allocs, 1);
  EXPECT_EQ(s.num_allocs, 11);
  EXPECT_EQ(s.peak_bytes_in_use, 1024);
  EXPECT_EQ(s.bytes_reserved, 1024);
  // Two live blocks of one class need two cudaMallocs; peak follows.
  absl::StatusOr<void*> c = allocator.Allocate(1024), d = allocator.Allocate(1024);
  ASSERT_TRUE(c.ok() && d.ok());
  EXPECT_NE(*c, *d);
  EXPECT_EQ(allocator.stats().num_system_allocs, 2);
  EXPECT_EQ(allocator.stats().peak_bytes_in_use, 2048);
  allocator.Deallocate(*c, 1024);
  allocator.Deallocate(*d, 1024);
  allocator.ResetPeak();
  EXPECT_EQ(allocator.stats().peak_bytes_in_use, 0);
  allocator.ReleaseCached();
  EXPECT_EQ(allocator.stats().bytes_reserved, 0);
}

TEST(CudaAllocatorTest, LargeBlocksServeSlightlySmallerRequests) {
  CAVS_SKIP_WITHOUT_CUDA();
  CudaAllocator allocator(0, Backend0()->stream());
  const size_t big = 64 << 20;
  absl::StatusOr<void*> a = allocator.Allocate(big);
  ASSERT_TRUE(a.ok());
  allocator.Deallocate(*a, big);
  absl::StatusOr<void*> b = allocator.Allocate(big - (3 << 20));  // within 1/8: reused
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, *a);
  EXPECT_EQ(allocator.stats().bytes_in_use, static_cast<int64_t>(big));
  allocator.Deallocate(*b, big - (3 << 20));
  absl::StatusOr<void*> c = allocator.Allocate(big / 4);  // far smaller: a block of its own
  ASSERT_TRUE(c.ok());
  EXPECT_NE(*c, *a);
  EXPECT_EQ(allocator.stats().num_system_allocs, 2);
  allocator.Deallocate(*c, big / 4);
}

TEST(CudaAllocatorTest, OutOfMemoryIsResourceExhausted) {
  CAVS_SKIP_WITHOUT_CUDA();
  CudaAllocator allocator(0, Backend0()->stream());
  absl::StatusOr<void*> small = allocator.Allocate(4096);
  ASSERT_TRUE(small.ok());
  allocator.Deallocate(*small, 4096);
  absl::StatusOr<void*> huge = allocator.Allocate(size_t{1} << 40);  // 1 TiB
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_NE(huge.status().message().find("cudaMalloc"), absl::string_view::npos);
  EXPECT_EQ(allocator.stats().bytes_reserved, 0);          // the retry released the cache
  absl::StatusOr<void*> again = allocator.Allocate(4096);  // still usable
  ASSERT_TRUE(again.ok());
  allocator.Deallocate(*again, 4096);
}

TEST(CudaBackendTest, CopiesRoundTrip) {
  CAVS_SKIP_WITHOUT_CUDA();
  CudaBackend* backend = Backend0();
  EXPECT_EQ(backend->device(), core::Device::Cuda(0));
  std::vector<float> host(10000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = 0.5f * static_cast<float>(i) - 7.0f;
  DeviceArray<float> a(host), b(host.size());
  ASSERT_TRUE(backend->CopyWithin(b.get(), a.get(), a.bytes()).ok());
  EXPECT_EQ(b.Download(), host);
  ASSERT_TRUE(backend->SetZero(b.get() + 100, 50 * sizeof(float)).ok());
  std::vector<float> want = host;
  std::fill(want.begin() + 100, want.begin() + 150, 0.0f);
  EXPECT_EQ(b.Download(), want);
  EXPECT_TRUE(backend->Synchronize().ok());
  EXPECT_TRUE(backend->CopyToHost(nullptr, nullptr, 0).ok());
}

TEST(CudaBackendTest, PinnedMemoryAndStaging) {
  CAVS_SKIP_WITHOUT_CUDA();
  CudaBackend* backend = Backend0();
  absl::StatusOr<void*> pinned = PinnedAlloc(4096);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_TRUE(IsPinned(*pinned));
  EXPECT_TRUE(IsPinned(static_cast<char*>(*pinned) + 4095));
  EXPECT_FALSE(IsPinned(static_cast<char*>(*pinned) + 4096));
  std::vector<float> host(1024, 3.0f);
  std::memcpy(*pinned, host.data(), 4096);
  DeviceArray<float> a(1024);
  ASSERT_TRUE(backend->CopyFromHost(a.get(), *pinned, 4096).ok());  // waits: pinned source
  std::memset(*pinned, 0, 4096);
  EXPECT_EQ(a.Download(), host);
  PinnedFree(*pinned);

  PinnedStaging staging(backend);
  for (int round = 1; round <= 3; ++round) {  // the buffer is reused only after each upload
    const size_t n = 1000 * round;
    absl::StatusOr<void*> buffer = staging.Acquire(n * sizeof(float));
    ASSERT_TRUE(buffer.ok());
    std::vector<float> values(n, static_cast<float>(round));
    std::memcpy(*buffer, values.data(), n * sizeof(float));
    DeviceArray<float> d(n);
    ASSERT_TRUE(staging.Upload(d.get(), n * sizeof(float)).ok());
    EXPECT_EQ(d.Download(), values);
  }
}

TEST(CudaBackendTest, TensorsOnTheDevice) {
  CAVS_SKIP_WITHOUT_CUDA();
  core::Tensor host = core::Tensor::FromVector({1, 2, 3, 4, 5, 6}, core::Shape({2, 3}));
  absl::StatusOr<core::Tensor> dev = host.CopyTo(core::Device::Cuda(0));
  ASSERT_TRUE(dev.ok()) << dev.status();
  EXPECT_EQ(dev->device(), core::Device::Cuda(0));
  EXPECT_EQ(dev->ToVector(), host.ToVector());
  ASSERT_TRUE(dev->Rows(1, 2).SetZero().ok());
  EXPECT_EQ(dev->ToVector(), (std::vector<float>{1, 2, 3, 0, 0, 0}));
}

TEST(CudaKernelsSettingsTest, Tf32IsOffByDefault) {
  CAVS_SKIP_WITHOUT_CUDA();
  absl::StatusOr<Kernels*> any = GetKernels(core::Device::Cuda(0));
  ASSERT_TRUE(any.ok()) << any.status();
  auto* kernels = dynamic_cast<CudaKernels*>(*any);
  ASSERT_NE(kernels, nullptr);
  EXPECT_FALSE(kernels->allow_tf32());
  cublasMath_t mode;
  ASSERT_EQ(cublasGetMathMode(kernels->cublas(), &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_DEFAULT_MATH);
  // 1 + 2^-20 survives an fp32 product but not TF32's 10-bit mantissa: c = a * 1 exactly.
  const int64_t m = 64, n = 64, k = 64;
  std::vector<float> a(m * k, 0.0f), b(k * n, 0.0f);
  for (int64_t i = 0; i < m; ++i) a[i * k + i] = 1.0f + std::ldexp(1.0f, -20);
  for (int64_t i = 0; i < k; ++i) b[i * n + i] = 1.0f;
  DeviceArray<float> da(a), db(b), dc(m * n);
  ASSERT_TRUE(
      kernels->Gemm(false, false, m, n, k, 1.0f, da.get(), k, db.get(), n, 0.0f, dc.get(), n).ok());
  std::vector<float> c = dc.Download();
  for (int64_t i = 0; i < m; ++i) ASSERT_EQ(c[i * n + i], a[i * k + i]) << i;
  ASSERT_TRUE(kernels->SetAllowTf32(true).ok());
  EXPECT_TRUE(kernels->allow_tf32());
  ASSERT_EQ(cublasGetMathMode(kernels->cublas(), &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_TF32_TENSOR_OP_MATH);
  ASSERT_TRUE(kernels->SetAllowTf32(false).ok());
}

TEST(CudaKernelsSettingsTest, BadArgumentsAreStatuses) {
  CAVS_SKIP_WITHOUT_CUDA();
  absl::StatusOr<CudaKernels*> kernels = GetCudaKernels(0);
  ASSERT_TRUE(kernels.ok());
  DeviceArray<float> buf(64);
  EXPECT_EQ((*kernels)
                ->Gemm(false, false, 4, 4, 4, 1.0f, buf.get(), 2, buf.get(), 4, 0.0f, buf.get(), 4)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*kernels)->GatherRows(nullptr, 4, nullptr, 4, 4, buf.get(), 4).code(),
            absl::StatusCode::kInvalidArgument);
  EwInstr bad;
  bad.op = EwOp::kAdd;
  bad.width = 4;
  bad.dst = {buf.get(), 4};
  bad.a = {buf.get(), 4};  // b missing
  EXPECT_EQ((*kernels)->Elementwise(&bad, &bad, 1, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*kernels)->Fill(buf.get(), 0, 1.0f).ok());
  EXPECT_TRUE((*kernels)->Synchronize().ok());
}

}  // namespace
}  // namespace cavs::ops::cuda
