// HostStaging: a host buffer standing in for a tensor while a host-only transport (MPI) works on
// it. For a host tensor it is the tensor's own memory (no copy); for a device tensor it is
// a block of the device plug-in's page-locked host memory (core::PinnedHostBlock, pooled by
// the plug-in) where it has one (pageable memory otherwise), filled from the device at
// creation if asked and written back by Finish() if asked.
//
// Thread-safety: a HostStaging is used by one thread; the pool behind it is internally locked.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace cavs::distributed {

class HostStaging {
 public:
  HostStaging() = default;

  // copy_in: the transport reads the buffer; copy_out: it writes the buffer.
  [[nodiscard]] static absl::StatusOr<HostStaging> Create(const core::Tensor& tensor, bool copy_in,
                                                          bool copy_out);

  void* data() const { return host_ ? host_.get() : tensor_.raw_data(); }
  // Copies the host buffer back into a device tensor (copy_out only; a no-op on the host).
  [[nodiscard]] absl::Status Finish();

 private:
  core::Tensor tensor_;
  std::shared_ptr<void> host_;  // null for host tensors
  bool copy_out_ = false;
};

}  // namespace cavs::distributed
