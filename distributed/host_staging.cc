#include "distributed/host_staging.h"

#include <map>
#include <mutex>
#include <utility>

#include "core/backend.h"
#include "core/status.h"

#if defined(CAVS_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace cavs::distributed {

namespace {

// Page-locked blocks by size class, reused across operations.
class PinnedPool {
 public:
  static PinnedPool& Get() {
    static PinnedPool* pool = new PinnedPool();  // never destroyed: blocks may outlive main
    return *pool;
  }

  // A page-locked block of at least `bytes`, or nullptr when the CUDA runtime has none.
  std::shared_ptr<void> Allocate(size_t bytes) {
    const size_t size = SizeClass(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    void* p = nullptr;
    auto it = free_.find(size);
    if (it != free_.end()) {
      p = it->second;
      free_.erase(it);
    } else {
      p = AllocatePinned(size);
      if (p == nullptr) return nullptr;
    }
    return std::shared_ptr<void>(p, [this, size](void* q) {
      std::lock_guard<std::mutex> hold(mu_);
      free_.emplace(size, q);
    });
  }

 private:
  static size_t SizeClass(size_t bytes) {
    size_t size = 4096;
    while (size < bytes) size *= 2;
    return size;
  }

  // Requires mu_.
  void* AllocatePinned(size_t bytes) {
#if defined(CAVS_WITH_CUDA)
    if (!unavailable_) {
      void* p = nullptr;
      if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) == cudaSuccess) return p;
      cudaGetLastError();  // clear the error, so that later CUDA calls do not report it
      unavailable_ = true;
    }
#endif
    (void)bytes;
    return nullptr;
  }

  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  bool unavailable_ = false;
};

}  // namespace

absl::StatusOr<HostStaging> HostStaging::Create(const core::Tensor& tensor, bool copy_in,
                                                bool copy_out) {
  HostStaging staging;
  staging.tensor_ = tensor;
  if (tensor.device().is_cpu() || tensor.nbytes() == 0) return staging;
  staging.copy_out_ = copy_out;
  staging.host_ = PinnedPool::Get().Allocate(tensor.nbytes());
  if (staging.host_ == nullptr) {  // no page-locked memory: a pageable host tensor instead
    core::Tensor host = core::Tensor::Host(tensor.shape(), tensor.dtype());
    staging.host_ = std::shared_ptr<void>(host.raw_data(), [host](void*) {});
  }
  if (copy_in) {
    CAVS_ASSIGN_OR_RETURN(core::Backend * backend, core::GetBackend(tensor.device()));
    CAVS_RETURN_IF_ERROR(
        backend->CopyToHost(staging.host_.get(), tensor.raw_data(), tensor.nbytes()));
  }
  return staging;
}

absl::Status HostStaging::Finish() {
  if (!copy_out_ || host_ == nullptr) return absl::OkStatus();
  CAVS_ASSIGN_OR_RETURN(core::Backend * backend, core::GetBackend(tensor_.device()));
  return backend->CopyFromHost(tensor_.raw_data(), host_.get(), tensor_.nbytes());
}

}  // namespace cavs::distributed
