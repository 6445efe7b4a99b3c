// A kernel that holds a stream for a while, to time device work alone.
//
// Work queued behind the delay starts when it ends and then runs back to back, with none of
// the gaps where the device waits for the host's next launch; CUDA events recorded after the
// delay therefore time the device's work, not the host's launch rate. Small GEMMs and fused
// rounds take a few microseconds on the device and as long to launch, so without it a timing
// measures the launches. Used by the GEMM autotuner (cuda_gemm.h) and the GPU benchmarks.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cavs::ops::cuda {

// One block of one thread that spins on the device's nanosecond timer for `nanoseconds`.
cudaError_t LaunchDelay(cudaStream_t stream, int64_t nanoseconds);

}  // namespace cavs::ops::cuda
