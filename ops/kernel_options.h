// KernelOptions: how each device's kernels run — which GEMM, which element-wise path, how many
// CPU threads, which checks. Every setting that chooses a code path is a field here, with its
// default and the measurement behind it; nothing in the library reads the environment.
//
// The kernels of a device are one object per process, shared by every engine on that device,
// so these options are per process too: ops::SetKernelOptions (ops/kernels.h) or
// scheduler::EngineOptions::kernels sets them, and the last call wins. A device takes its own
// part (`cpu` or `cuda`) and the shared checks.
//
// The environment is a debugging override for binaries only: cavs-train, the benchmarks and the
// test binaries call KernelOptionsFromEnvironment once, at start-up, and say what it changed.
// The variables, all optional:
//
//   CAVS_NUM_THREADS=N          cpu.threads
//   CAVS_PACKED_GEMM=0|1        cpu.packed_gemm
//   CAVS_PACKED_GEMM_AVX2=0|1   cpu.packed_gemm_avx2
//   CAVS_CPU_EW_AS_PLANNED=0|1  cpu.ew_as_planned
//   CAVS_CPU_EW_ROW_OFFSET=0|1  cpu.ew_row_offset
//   CAVS_CUDA_FUSED=0|1         cuda.generated_elementwise
//   CAVS_CUBLASLT=0|1           cuda.cublas_lt
//   CAVS_GEMM_AUTOTUNE=0|1      cuda.gemm_autotune
//   CAVS_SMALL_GEMM=0|1         cuda.small_gemm: kOff (0) or kEverywhere (1)
//   CAVS_KERNEL_CACHE=DIR|0     cuda.kernel_cache_dir, or cuda.kernel_cache = false (0 or empty)
//   CAVS_CUDA_GRAPHS=0|1        cuda.graphs
//   CAVS_CUDA_EW_ROW_OFFSET=0|1 cuda.ew_row_offset
//   CAVS_VERIFY_EW_SHAPES=0|1   verify_ew_shapes
//
// A value other than those shown leaves the field as it was and is reported as ignored.
#pragma once

#include <string>
#include <vector>

namespace cavs::ops {

struct CpuKernelOptions {
  // Threads of the CPU kernels' pool, OpenBLAS included (ops/cpu/cpu_parallel.h); 0: as many as
  // the CPUs this process may run on.
  int threads = 0;
  // The packed-weight AVX-512 GEMM for the rounds' skinny products (ops/cpu/cpu_packed_gemm.h),
  // where the CPU has AVX-512F. Off: OpenBLAS for every GEMM, the path of other CPUs (the tests
  // run both).
  bool packed_gemm = true;
  // Where the CPU has AVX-512F, the packed GEMM's AVX2 + FMA kernel instead of its AVX-512 one,
  // and the choices of a CPU without AVX-512 with it (OpenBLAS for speed, the packed kernel for
  // batch invariance alone): to run on one machine what AMD Zen and older Intel CPUs run, for
  // tests and comparisons. Both kernels compute the same bits.
  bool packed_gemm_avx2 = false;
  // Each fused program run as the generated CUDA kernel would run its plan (RunEwPlanOnHost in
  // ops/ew_plan.h): slow, for checking the plans of real programs without a GPU.
  bool ew_as_planned = false;
  // Elementwise takes a row offset (Kernels::ElementwiseRowOffset): the engine records each
  // step's fused program once per batch and every round runs it at its own rows, so that a
  // batch's host memory does not grow by a program per round (bench/round_memory_benchmark).
  // Off: a copy of the program moved to each round's rows, as on CUDA, whose kernels take no
  // offset (the tests run both).
  bool ew_row_offset = true;

  bool operator==(const CpuKernelOptions&) const = default;
};

// Where the CUDA GEMM takes the small-GEMM kernel (ops/cuda/small_gemm.h) instead of cuBLAS:
// nowhere, where measured faster (small_gemm::Faster: the Tree-LSTM's forward rounds; the
// default), or wherever it applies (A not transposed, at most small_gemm::kMaxRows rows; for
// tests and A/B rows).
enum class SmallGemmUse { kOff, kWhereFaster, kEverywhere };

struct CudaKernelOptions {
  // Element-wise programs through kernels generated per program shape and compiled by NVRTC
  // (ops/cuda/cuda_fused.h); off, or where NVRTC cannot compile for the device, through the
  // interpreter (ops/cuda/cuda_elementwise.h), which takes no scratch operands.
  bool generated_elementwise = true;
  // GEMMs through cuBLASLt with plans memoized per problem (ahead of cublasSgemm in 11 of 12
  // batch-256 rows on an H100, bench/RESULTS.md); off: cublasSgemm.
  bool cublas_lt = true;
  // cuBLASLt's algorithms timed on the device once per class of problems, the fastest kept
  // (ops/cuda/cuda_gemm.h). Off by default: it gains on the weight gradients only, and makes a
  // run's GEMMs depend on the timings (docs/cuda.md, "Reproducibility").
  bool gemm_autotune = false;
  SmallGemmUse small_gemm = SmallGemmUse::kWhereFaster;
  // The on-disk cache of generated kernels, so that a later process loads what an earlier one
  // compiled: in `kernel_cache_dir`, or where empty $XDG_CACHE_HOME/cavs/kernels, else
  // $HOME/.cache/cavs/kernels (none where neither is set).
  bool kernel_cache = true;
  std::string kernel_cache_dir;
  // A batch's launches captured into a CUDA graph and launched as one (Kernels::QueueRecorded,
  // ops/cuda/cuda_graph.h) where the engine's caller does not wait for it at once
  // (Engine::Submit; Run never does): one launch for the host to queue instead of one per
  // kernel, the executable graph kept per topology and updated in place. On an H200 (SST
  // Tree-LSTM, one process) Submit/Finish pipelined gained 1.12-1.40x in 4 of 4 rows; a lone
  // Run lost 0.71-0.82x, the device waiting for the whole capture (bench/RESULTS.md). Off:
  // every kernel launched by the host, the reference path (results are bit-equal either way).
  bool graphs = true;
  // Elementwise takes a row offset (Kernels::ElementwiseRowOffset; cpu.ew_row_offset says what
  // it saves): the kernels add it to every row index but the shared row's, and rounds share
  // their programs. On an H200 (SST Tree-LSTM, one process, CUDA graphs on) it gained 1.01x
  // training and 1.02x inference at batch 256, with half the planning time; the same bits as a
  // copy per round (bench/RESULTS.md, run 10). Off: the engine records a copy of each round's
  // program.
  bool ew_row_offset = true;

  bool operator==(const CudaKernelOptions&) const = default;
};

struct KernelOptions {
  CpuKernelOptions cpu;
  CudaKernelOptions cuda;
  // Checks of the engine's program shapes (a promise that every program recorded under one
  // shape plans alike; ops/ew_plan.h's EwShapeChecker on the CPU, every launch re-planned
  // by the generated CUDA kernels). For tests: it costs a plan per launch.
  bool verify_ew_shapes = false;

  bool operator==(const KernelOptions&) const = default;
};

// One line for logs and start-up lines: "cpu{threads=0 packed_gemm=1 ...} cuda{...} ...".
std::string KernelOptionsString(const KernelOptions& options);

// `base` with the CAVS_* variables above applied, and what was read ("CAVS_PACKED_GEMM=0", or
// "CAVS_NUM_THREADS=x (ignored)"), in the order listed above. Only binaries call this.
struct EnvironmentOverride {
  KernelOptions options;
  std::vector<std::string> read;
};
EnvironmentOverride KernelOptionsFromEnvironment(const KernelOptions& base = {});

}  // namespace cavs::ops
