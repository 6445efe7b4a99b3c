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

// CAVS_CPU_VECTOR_CLONES marks a hot loop function for GCC function multi-versioning: the
// library stays portable (x86-64 baseline) but runs AVX-512 or AVX2+FMA code where the CPU has
// it, picked once by the dynamic loader. Not under ThreadSanitizer: GCC 12 instruments the
// clones' ifunc resolver too, which the loader runs while relocating the executable, before the
// TSan runtime is up: every test binary crashed at load.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__) && \
    !defined(__CUDACC__) && !defined(__SANITIZE_THREAD__)
#define CAVS_CPU_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CAVS_CPU_VECTOR_CLONES
#endif
