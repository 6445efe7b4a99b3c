#include "distributed/host_staging.h"

#include <memory>

#include "core/backend.h"
#include "core/device_plugin.h"
#include "core/status.h"

namespace cavs::distributed {

absl::StatusOr<HostStaging> HostStaging::Create(const core::Tensor& tensor, bool copy_in,
                                                bool copy_out) {
  HostStaging staging;
  staging.tensor_ = tensor;
  if (tensor.device().is_cpu() || tensor.nbytes() == 0) return staging;
  staging.copy_out_ = copy_out;
  staging.host_ = core::PinnedHostBlock(tensor.device().type, tensor.nbytes());
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
