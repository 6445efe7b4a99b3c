// CPU threading for the ops: one small persistent thread pool shared by every CPU kernel,
// OpenBLAS included.
//
// Why a pool of our own and not OpenMP + OpenBLAS's threads: Debian's OpenBLAS is the pthread
// build, whose workers spin (yielding) for a long while after each call, and libgomp's workers
// spin after each parallel region. On a machine with few cores the two sets of spinners steal
// each other's cores between a GEMM and the element-wise kernel that follows it. Here OpenBLAS
// is always told to use one thread (openblas_set_num_threads(1)), and a large GEMM is split
// into blocks of C that the pool's threads compute with single-threaded sgemm calls. So there is
// exactly one set of worker threads, and OpenBLAS and the loops take turns by construction.
//
// The pool has CpuThreads() - 1 workers; the calling thread is the remaining one and always
// works too. Workers spin briefly (tens of microseconds) after a job, so that the next kernel of
// a round finds them awake, then sleep on a condition variable.
//
// Thread count: the CPUs this process may run on, until SetCpuThreads(n) (or
// KernelOptions::cpu.threads, ops/kernel_options.h) sets another, at any time.
//
// Thread-safety: every function may be called from any thread. ParallelFor from several threads
// at once is correct: one caller gets the pool, the others run their loops serially. A loop body
// that calls ParallelFor again (nested) also runs serially.
#pragma once

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace cavs::ops::cpu {

// Sets the number of threads the CPU kernels use (OpenBLAS included); n <= 0 restores the
// default (the CPUs this process may run on).
void SetCpuThreads(int n);
// The number of threads the CPU kernels use (>= 1).
int CpuThreads();

// Below this much work (elements touched) a loop runs on the calling thread alone: waking the
// workers costs about a microsecond when they are spinning and several when they sleep.
inline constexpr int64_t kParallelMinWork = 16 * 1024;

// Runs fn(task) for every task in [0, num_tasks), on the calling thread and the pool's workers,
// in any order; returns when all are done. Tasks are handed out one at a time, so a worker
// that the OS deschedules does not hold up the others.
void RunTasks(int64_t num_tasks, absl::FunctionRef<void(int64_t)> fn);

// Runs fn(begin, end) over disjoint ranges covering [0, n). Parallel only when
// n * work_per_item >= kParallelMinWork; ranges are then sized so that each has at least that
// much work, with a few ranges per thread for balance. The split depends on the thread count:
// use ParallelForChunks where results must not depend on it.
void ParallelFor(int64_t n, int64_t work_per_item,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> fn);

// Runs fn(chunk, begin, end) for the fixed chunks [chunk * chunk_size, ...) of [0, n): the same
// split for any thread count, so per-chunk partial results combine deterministically. Parallel
// only when n * work_per_item >= kParallelMinWork.
void ParallelForChunks(int64_t n, int64_t chunk_size, int64_t work_per_item,
                       absl::FunctionRef<void(int64_t chunk, int64_t begin, int64_t end)> fn);

// The number of chunks ParallelForChunks uses for (n, chunk_size).
inline int64_t NumChunks(int64_t n, int64_t chunk_size) {
  return n <= 0 ? 0 : (n + chunk_size - 1) / chunk_size;
}

}  // namespace cavs::ops::cpu
