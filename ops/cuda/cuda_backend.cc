#include "ops/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cuda/cuda_status.h"

namespace cavs::ops::cuda {

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: not an error worth keeping
    return 0;
  }
  return count;
}

CudaBackend::CudaBackend(int ordinal, cudaStream_t stream)
    : ordinal_(ordinal), stream_(stream), allocator_(ordinal, stream) {}

CudaBackend::~CudaBackend() {
  staging_.reset();
  for (const ReadbackBlock& b : readback_free_) cudaEventDestroy(b.done);
  readback_free_.clear();  // their host blocks go back to the pool
  allocator_.ReleaseCached();
  cudaStreamDestroy(stream_);
}

absl::Status CudaBackend::CopyFromHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  // From HostStaging's buffer: queued; the next HostStaging waits for it.
  if (staging_ != nullptr && src == staging_->data()) return staging_->Upload(dst, bytes);
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  // Pageable sources are staged before cudaMemcpyAsync returns; a pinned one is read later.
  if (IsPinned(src)) CAVS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::StatusOr<void*> CudaBackend::HostStaging(size_t bytes) {
  if (staging_ == nullptr) staging_ = std::make_unique<PinnedStaging>(this);
  return staging_->Acquire(bytes);
}

namespace {

// A readback into a pinned block of `backend`'s, returned to it when destroyed.
class PinnedReadback final : public core::Readback {
 public:
  PinnedReadback(CudaBackend* backend, const CudaBackend::ReadbackBlock& block)
      : backend_(backend), block_(block) {}
  ~PinnedReadback() override {
    // The copies may still be writing the block: it is reused only once they are known done
    // (else it is left allocated; the stream is then broken anyway).
    if (Wait().ok() && recorded_) backend_->ReturnReadbackBlock(block_);
  }
  absl::Status Wait() override {
    if (waited_) return absl::OkStatus();
    CudaDeviceGuard guard;
    CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
    CAVS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(block_.done));
    waited_ = true;
    return absl::OkStatus();
  }
  void AddPart(const void* p) { parts_.push_back(p); }
  // The event was recorded after the copies (so Wait waits for them).
  void SetRecorded() { recorded_ = true; }

 private:
  CudaBackend* backend_;
  CudaBackend::ReadbackBlock block_;
  bool waited_ = false;
  bool recorded_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<core::Readback>> CudaBackend::StartReadback(
    const std::vector<core::ReadbackPart>& parts) {
  size_t total = 8;
  for (const core::ReadbackPart& p : parts) total += (p.bytes + 7) / 8 * 8;
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(MakeCurrent(guard));
  ReadbackBlock block, dropped;
  {
    std::lock_guard<std::mutex> lock(readback_mu_);
    // The smallest free block that fits; if none does, the smallest is dropped (the pool stays
    // as large as the readbacks in flight).
    auto best = readback_free_.end(), smallest = readback_free_.end();
    for (auto it = readback_free_.begin(); it != readback_free_.end(); ++it) {
      if (it->capacity >= total &&
          (best == readback_free_.end() || it->capacity < best->capacity)) {
        best = it;
      }
      if (smallest == readback_free_.end() || it->capacity < smallest->capacity) smallest = it;
    }
    if (best != readback_free_.end()) {
      block = *best;
      readback_free_.erase(best);
    } else if (smallest != readback_free_.end()) {
      dropped = *smallest;
      readback_free_.erase(smallest);
    }
  }
  if (dropped.host != nullptr) {
    dropped.host.reset();  // to the pool: its readback was waited for before it was returned
    cudaEventDestroy(dropped.done);
  }
  if (block.host == nullptr) {
    const size_t capacity = std::max<size_t>(total + total / 2, size_t{64} << 10);
    block.host = PinnedBlock(capacity);
    if (block.host == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no page-locked host memory for a readback of ", capacity, " bytes"));
    }
    block.capacity = capacity;
    if (const cudaError_t e = cudaEventCreateWithFlags(&block.done, cudaEventDisableTiming);
        e != cudaSuccess) {
      return CudaStatus(e, "cudaEventCreateWithFlags(&block.done, cudaEventDisableTiming)",
                        __FILE__, __LINE__);
    }
  }
  // From here the readback owns the block (and returns it on every path).
  auto readback = std::make_unique<PinnedReadback>(this, block);
  char* at = static_cast<char*>(block.host.get());
  cudaError_t copy = cudaSuccess;
  for (const core::ReadbackPart& p : parts) {
    if (p.bytes > 0 && copy == cudaSuccess) {
      copy = cudaMemcpyAsync(at, p.src, p.bytes, cudaMemcpyDeviceToHost, stream_);
    }
    readback->AddPart(at);
    at += (p.bytes + 7) / 8 * 8;
  }
  // Recorded after the copies queued, even after a failed one: the block is reused only once
  // the event has passed them (not at all if the record fails).
  CAVS_CUDA_RETURN_IF_ERROR(cudaEventRecord(block.done, stream_));
  readback->SetRecorded();
  if (copy != cudaSuccess) {
    return CudaStatus(copy, "cudaMemcpyAsync(at, p.src, p.bytes, cudaMemcpyDeviceToHost, stream_)",
                      __FILE__, __LINE__);
  }
  return readback;
}

void CudaBackend::ReturnReadbackBlock(const ReadbackBlock& block) {
  std::lock_guard<std::mutex> lock(readback_mu_);
  readback_free_.push_back(block);
}

absl::Status CudaBackend::CopyFromPinnedAsync(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  CAVS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::CopyWithin(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return absl::OkStatus();
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::SetZero(void* dst, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, 0, bytes, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::Synchronize() {
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::StatusOr<CudaBackend*> GetCudaBackend(int ordinal) {
  static std::mutex* mu = new std::mutex();
  static std::vector<CudaBackend*>* backends = new std::vector<CudaBackend*>();  // never freed
  std::lock_guard<std::mutex> lock(*mu);
  if (ordinal >= 0 && static_cast<size_t>(ordinal) < backends->size() &&
      (*backends)[ordinal] != nullptr) {
    return (*backends)[ordinal];  // the common case: every tensor copy asks
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    return absl::FailedPreconditionError(
        absl::StrCat("device cuda:", ordinal, " requested, but this machine has no CUDA device (",
                     err == cudaSuccess ? "none found" : cudaGetErrorString(err), ")"));
  }
  if (ordinal < 0 || ordinal >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device cuda:", ordinal, " requested, but this machine has ", count, " CUDA device(s)"));
  }
  if (backends->size() < static_cast<size_t>(count)) backends->resize(count, nullptr);
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(guard.Set(ordinal));
  cudaStream_t stream = nullptr;
  CAVS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  (*backends)[ordinal] = new CudaBackend(ordinal, stream);
  return (*backends)[ordinal];
}

// ---------------------------------------------------------------------------------------------
// Pinned host memory.

namespace {

struct PinnedRegistry {
  std::mutex mu;
  std::map<uintptr_t, size_t> blocks;  // start -> bytes
};

PinnedRegistry& Pinned() {
  static PinnedRegistry* registry = new PinnedRegistry();
  return *registry;
}

}  // namespace

absl::StatusOr<void*> PinnedAlloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return CAVS_CUDA_STATUS(err);
  }
  PinnedRegistry& r = Pinned();
  std::lock_guard<std::mutex> lock(r.mu);
  r.blocks[reinterpret_cast<uintptr_t>(p)] = bytes;
  return p;
}

void PinnedFree(void* p) {
  if (p == nullptr) return;
  {
    PinnedRegistry& r = Pinned();
    std::lock_guard<std::mutex> lock(r.mu);
    CAVS_CHECK(r.blocks.erase(reinterpret_cast<uintptr_t>(p)) == 1,
               "PinnedFree of memory not from PinnedAlloc");
  }
  cudaFreeHost(p);
}

bool IsPinned(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  PinnedRegistry& r = Pinned();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.blocks.upper_bound(addr);
  if (it == r.blocks.begin()) return false;
  --it;
  return addr < it->first + it->second;
}

namespace {

// PinnedBlock's pool: free blocks by size class.
struct PinnedPool {
  std::mutex mu;
  std::multimap<size_t, void*> free;
  bool unavailable = false;
};

PinnedPool& Pool() {
  static PinnedPool* pool = new PinnedPool();  // never destroyed: blocks may outlive main
  return *pool;
}

}  // namespace

std::shared_ptr<void> PinnedBlock(size_t bytes) {
  size_t size = 4096;
  while (size < bytes) size *= 2;
  PinnedPool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  void* p = nullptr;
  if (auto it = pool.free.find(size); it != pool.free.end()) {
    p = it->second;
    pool.free.erase(it);
  } else {
    if (pool.unavailable) return nullptr;
    absl::StatusOr<void*> made = PinnedAlloc(size);
    if (!made.ok()) {
      pool.unavailable = true;
      return nullptr;
    }
    p = *made;
  }
  return std::shared_ptr<void>(p, [size](void* q) {
    PinnedPool& pool = Pool();
    std::lock_guard<std::mutex> hold(pool.mu);
    pool.free.emplace(size, q);
  });
}

PinnedStaging::~PinnedStaging() {
  if (done_ != nullptr) {
    cudaEventSynchronize(done_);
    cudaEventDestroy(done_);
  }
  PinnedFree(host_);
}

absl::StatusOr<void*> PinnedStaging::Acquire(size_t bytes) {
  if (pending_) {
    CAVS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(done_));
    pending_ = false;
  }
  if (bytes > capacity_) {
    const size_t size = std::max(bytes, capacity_ + capacity_ / 2);
    PinnedFree(host_);
    host_ = nullptr;
    capacity_ = 0;
    CAVS_ASSIGN_OR_RETURN(host_, PinnedAlloc(size));
    capacity_ = size;
  }
  return host_;
}

absl::Status PinnedStaging::Upload(void* dst, size_t bytes) {
  CAVS_CHECK(bytes <= capacity_, "PinnedStaging::Upload of ", bytes, " bytes from a buffer of ",
             capacity_);
  if (bytes == 0) return absl::OkStatus();
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  if (done_ == nullptr) {
    CAVS_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  }
  CAVS_RETURN_IF_ERROR(backend_->CopyFromPinnedAsync(dst, host_, bytes));
  CAVS_CUDA_RETURN_IF_ERROR(cudaEventRecord(done_, backend_->stream()));
  pending_ = true;
  return absl::OkStatus();
}

}  // namespace cavs::ops::cuda
