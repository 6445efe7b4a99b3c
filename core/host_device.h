// CAVS_HOST_DEVICE: marks a function that one header serves to both compilers, the host C++
// compiler and nvcc (as CuTe's CUTE_HOST_DEVICE does). Such functions use plain arithmetic
// only: no std:: calls, no exceptions, no allocation, so that a CUDA kernel and the CPU
// compute bit-identical results from the same inputs (e.g. the Philox dropout mask).
#pragma once

#if defined(__CUDACC__)
#define CAVS_HOST_DEVICE __host__ __device__
#else
#define CAVS_HOST_DEVICE
#endif
