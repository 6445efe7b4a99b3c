// Plugs the CUDA implementation into the device-agnostic registries: the core::Backend
// factory for DeviceType::kCuda (tensors on Device::Cuda(n)), the ops::Kernels factory
// (GetKernels(Device::Cuda(n))) and the core::OptimizerKernels for CUDA parameters.
//
// Linking cavs_ops_cuda is enough: the registration runs at static initialization (this
// file's object is kept by a linker -u option that the target exports), and
// ops/kernels.cc calls RegisterCudaKernels() as well. Registering is idempotent and touches
// no CUDA API: a machine without a GPU only learns it when a device is first requested.
// This header has no CUDA types, so CPU-side code may include it under CAVS_WITH_CUDA.
#pragma once

namespace cavs::ops::cuda {

// Registers the CUDA backend, kernels and optimizer kernels (once; later calls do nothing).
void RegisterCudaKernels();

}  // namespace cavs::ops::cuda
