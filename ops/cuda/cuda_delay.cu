#include "ops/cuda/cuda_delay.h"

namespace cavs::ops::cuda {

namespace {

__device__ uint64_t GlobalNanoseconds() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void DelayKernel(uint64_t nanoseconds) {
  const uint64_t start = GlobalNanoseconds();
  while (GlobalNanoseconds() - start < nanoseconds) __nanosleep(500);
}

}  // namespace

cudaError_t LaunchDelay(cudaStream_t stream, int64_t nanoseconds) {
  DelayKernel<<<1, 1, 0, stream>>>(static_cast<uint64_t>(nanoseconds > 0 ? nanoseconds : 0));
  return cudaGetLastError();
}

}  // namespace cavs::ops::cuda
