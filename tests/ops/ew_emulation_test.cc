// The CUDA source the generated element-wise kernels are made of (EmitEwKernelCuda), compiled by
// the host C++ compiler and run on host threads, against the CPU kernels: the emitted text
// itself, not only its plan, checked on machines without a GPU.
//
// A small prelude makes the source host C++: __global__ and __device__ vanish, threadIdx and
// blockIdx are thread-locals, each block is 256 (or 512) std::threads with a std::barrier for
// __syncthreads, each warp 32 of them exchanging through slots for __shfl_xor_sync, the
// rounded intrinsics are the plain IEEE operations (std::fma for __fmaf_rn), and the shared
// row (CAVS_EW_SHARED) is a buffer per block. The kernel is built as a shared object with the
// compiler that built this test and loaded with dlopen; the test skips where that compiler is
// gone. The launch shape (rows per block) is the one CudaFusedElementwise computes for one SM.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/random.h"
#include "gtest/gtest.h"
#include "ops/cpu/cpu_elementwise.h"
#include "ops/cuda/column_reduce.h"
#include "ops/cuda/ew_codegen.h"
#include "tests/ops/ew_programs.h"
#include "tests/ops/ops_test_util.h"
#include "tests/testing/temp_dir.h"

namespace cavs::ops {
namespace {

using cuda::EmitEwBodyCuda;
using cuda::EmitEwKernelCuda;
using cuda::EwKernelName;
using cuda::EwRowsPerBlock;
using cuda::kEwKernelThreads;
using testing::AllClose;
using testing::EwProgram;
using testing::RandomProgram;
using testing::Scratch;

constexpr const char* kPrelude = R"(#pragma once
#include <math.h>
#include <atomic>
#include <barrier>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)
struct CavsEmuDim { unsigned x = 0, y = 0, z = 0; };
struct float4 { float x, y, z, w; };
inline thread_local CavsEmuDim threadIdx, blockIdx;
inline CavsEmuDim gridDim{1, 1, 1};
inline int min(int a, int b) { return a < b ? a : b; }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_add(v); }
struct CavsEmuWarp {
  std::barrier<> sync{32};
  float slots[32];
};
inline thread_local std::barrier<>* cavs_emu_block;
inline thread_local CavsEmuWarp* cavs_emu_warp;
inline thread_local float* cavs_emu_shared;
inline void __syncthreads() { cavs_emu_block->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int off) {
  CavsEmuWarp* w = cavs_emu_warp;
  const unsigned lane = threadIdx.x & 31;
  w->slots[lane] = v;
  w->sync.arrive_and_wait();
  const float r = w->slots[lane ^ static_cast<unsigned>(off)];
  w->sync.arrive_and_wait();
  return r;
}
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
#define CAVS_EW_SHARED(name) float* const name = cavs_emu_shared
#define CAVS_ROUND_SHARED(name) float4* const name = reinterpret_cast<float4*>(cavs_emu_shared)
// Every block of `grid` at once, `block_threads` host threads each, every block with its own
// barrier, warps and `shared_floats` of shared memory (zeros, and 4 floats to spare); body() on
// every thread, with threadIdx and blockIdx set.
template <typename Body>
void CavsEmuRunGrid(CavsEmuDim grid, unsigned block_threads, long long shared_floats, Body body) {
  gridDim = grid;
  const unsigned blocks = grid.x * grid.y * grid.z;
  std::vector<std::unique_ptr<std::barrier<>>> barriers;
  std::vector<std::unique_ptr<CavsEmuWarp[]>> warps;
  std::vector<std::vector<float>> shared;
  for (unsigned b = 0; b < blocks; ++b) {
    barriers.push_back(std::make_unique<std::barrier<>>(block_threads));
    warps.emplace_back(new CavsEmuWarp[block_threads / 32]);
    shared.emplace_back(static_cast<size_t>(shared_floats) + 4, 0.0f);
  }
  std::vector<std::thread> threads;
  for (unsigned b = 0; b < blocks; ++b) {
    for (unsigned t = 0; t < block_threads; ++t) {
      threads.emplace_back([&, b, t] {
        threadIdx.x = t;
        blockIdx = CavsEmuDim{b % grid.x, b / grid.x % grid.y, b / (grid.x * grid.y)};
        cavs_emu_block = barriers[b].get();
        cavs_emu_warp = &warps[b][t / 32];
        cavs_emu_shared = shared[b].data();
        body();
      });
    }
  }
  for (std::thread& th : threads) th.join();
}
using CavsEmuKernel = void (*)(const unsigned char*, long long, int, long long);
extern "C" void cavs_emu_run(CavsEmuKernel kernel, const unsigned char* program, long long rows,
                             int rows_per_block, long long row0, long long shared_floats,
                             unsigned block_threads) {
  const long long blocks = (rows + rows_per_block - 1) / rows_per_block;
  for (long long b = 0; b < blocks; ++b) {
    std::barrier<> block(block_threads);
    std::unique_ptr<CavsEmuWarp[]> warps(new CavsEmuWarp[block_threads / 32]);
    std::vector<float> shared(static_cast<size_t>(shared_floats) + 1, 0.0f);
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block_threads; ++t) {
      threads.emplace_back([&, t] {
        threadIdx.x = t;
        blockIdx.x = static_cast<unsigned>(b);
        cavs_emu_block = &block;
        cavs_emu_warp = &warps[t / 32];
        cavs_emu_shared = shared.data();
        kernel(program, rows, rows_per_block, row0);
      });
    }
    for (std::thread& th : threads) th.join();
  }
}
)";

class EwEmulationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(CAVS_TEST_CXX)) {
      GTEST_SKIP() << "the compiler that built this test is gone: " << CAVS_TEST_CXX;
    }
    dir_ =
        cavs::tests::FreshTempDir(std::string("ew_emulation_") +
                                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::ofstream(dir_ / "prelude.h") << kPrelude;
  }
  void TearDown() override {
    for (void* so : loaded_) dlclose(so);
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // Emits, builds and runs `p`'s kernel on host threads; then runs p on the CPU kernels from
  // the same inputs and compares every buffer. With `threads` other than kEwKernelThreads, the
  // kernel is the program's body for that many threads (EmitEwBodyCuda, as a forward round's
  // single launch runs it after its GEMM) called by a kernel of that many. With `row0`, both
  // run rows [row0, p.rows) (Kernels::Elementwise's row offset).
  void Compare(EwProgram& p, const std::string& what, int threads = kEwKernelThreads,
               int64_t row0 = 0) {
    const int count = static_cast<int>(p.instrs.size());
    ASSERT_TRUE(cpu::ValidateProgram(p.instrs.data(), count, p.rows).ok()) << what;
    const int64_t rows = p.rows - row0;
    const EwKernelPlan plan = PlanEwKernel(p.instrs.data(), count, rows);
    const std::string name = EwKernelName(plan);
    std::string source;
    if (threads == kEwKernelThreads) {
      source = EmitEwKernelCuda(plan, name);
    } else {
      source = EmitEwBodyCuda(plan, name + "_body", threads) + "extern \"C\" void " + name +
               "(const unsigned char* program, long long rows, int rpb, long long row0) {\n  " +
               name + "_body(program, rows, rpb, blockIdx.x, row0);\n}\n";
    }
    void* handle = Build(name, source, "", what);
    if (handle == nullptr) return;
    using Kernel = void (*)(const unsigned char*, long long, int, long long);
    using Run =
        void (*)(Kernel, const unsigned char*, long long, int, long long, long long, unsigned);
    auto kernel = reinterpret_cast<Kernel>(dlsym(handle, name.c_str()));
    auto run = reinterpret_cast<Run>(dlsym(handle, "cavs_emu_run"));
    ASSERT_NE(kernel, nullptr);
    ASSERT_NE(run, nullptr);

    const std::vector<std::vector<float>> want =
        Expected(p, [&] { return cpu::Elementwise(p.instrs.data(), count, rows, row0); });
    if (plan.instrs.empty()) return;
    // CudaFusedElementwise's launch shape for a device of one SM.
    const int64_t rows_per_block = EwRowsPerBlock(rows, plan.max_width, 1);
    run(kernel, reinterpret_cast<const unsigned char*>(p.instrs.data()), rows,
        static_cast<int>(rows_per_block), row0, rows_per_block * plan.shared_width,
        static_cast<unsigned>(threads));
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(AllClose(*p.buffers[i], want[i], 1e-5, 1e-6)) << what << ", buffer " << i;
    }
  }

  // p's buffers after `reference` (the CPU's run of p), which must succeed; the buffers are then
  // as they were before it.
  template <typename Fn>
  static std::vector<std::vector<float>> Expected(EwProgram& p, Fn reference) {
    std::vector<std::vector<float>> before, after;
    for (const auto& b : p.buffers) before.push_back(*b);
    const absl::Status s = reference();
    EXPECT_TRUE(s.ok()) << s;
    for (const auto& b : p.buffers) after.push_back(*b);
    for (size_t i = 0; i < before.size(); ++i) *p.buffers[i] = before[i];
    return after;
  }

  // Builds `source` (with `tail` appended) as a shared object with the prelude; nullptr and a
  // failure where it does not compile.
  void* Build(const std::string& name, const std::string& source, const std::string& tail,
              const std::string& what) {
    const std::filesystem::path src = dir_ / (name + ".cu"), so = dir_ / (name + ".so");
    std::ofstream(src) << source << tail;
    const std::string cmd =
        std::string(CAVS_TEST_CXX) + " -std=c++20 -O1 -fPIC -shared -pthread -w -x c++ -include " +
        (dir_ / "prelude.h").string() + " -I" CAVS_SOURCE_DIR " " + src.string() + " -o " +
        so.string() + " 2>" + (dir_ / "log.txt").string();
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream log(dir_ / "log.txt");
      const std::string text((std::istreambuf_iterator<char>(log)), {});
      ADD_FAILURE() << what << ": the emitted source does not compile as host C++:\n" << text;
      return nullptr;
    }
    void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle, nullptr) << dlerror();
    if (handle != nullptr) loaded_.push_back(handle);
    return handle;
  }

  std::filesystem::path dir_;
  std::vector<void*> loaded_;
};

// Runs a column reduction (column_reduce.cuh), 256 threads a block: every block of its grid
// (column blocks x chunks of rows) at once, so the chunks of a column block race to count
// themselves in as they do on the device; or, with `order`, one block after another in that
// order (block b is column block b % column blocks, chunk b / column blocks), so that a test
// chooses which chunk arrives last.
constexpr const char* kColumnReduceRunner = R"(
#include "ops/cuda/column_reduce.cuh"
extern "C" void cavs_emu_run_column_reduce(const cavs::ops::cuda::column_reduce::Args* g,
                                           const int* order) {
  namespace cr = cavs::ops::cuda::column_reduce;
  const unsigned columns = static_cast<unsigned>((g->w + cr::kColumns - 1) / cr::kColumns);
  auto block = [g](unsigned bx, unsigned by) {
    if (g->y != nullptr) {
      cr::ReduceColumns<true>(*g, bx, by, threadIdx.x, cavs_emu_shared);
    } else {
      cr::ReduceColumns<false>(*g, bx, by, threadIdx.x, cavs_emu_shared);
    }
  };
  if (order == nullptr) {
    CavsEmuRunGrid(CavsEmuDim{columns, static_cast<unsigned>(g->chunks), 1}, cr::kThreads,
                   cr::kSharedFloats, [&] { block(blockIdx.x, blockIdx.y); });
    return;
  }
  for (unsigned i = 0; i < columns * static_cast<unsigned>(g->chunks); ++i) {
    const unsigned b = static_cast<unsigned>(order[i]);
    CavsEmuRunGrid(CavsEmuDim{1, 1, 1}, cr::kThreads, cr::kSharedFloats,
                   [&] { block(b % columns, b / columns); });
  }
}
)";

// How many chunks of rows a column reduction takes: about four blocks per multiprocessor, at
// least 64 rows each, within the workspace, and one where a column block would have no count.
// The figures are an H100's 132 multiprocessors and the workspace CudaKernels makes there.
TEST(ColumnReduceTest, ChunksFillTheChipWithinTheWorkspace) {
  const int64_t floats = 132 * 1024;  // an H100's (CudaKernels::kWorkspaceFloatsPerSm)
  EXPECT_EQ(cuda::column_reduce::Chunks(10000, 750, 132, floats, 132), 22);  // 24 column blocks
  EXPECT_EQ(cuda::column_reduce::Chunks(100, 750, 132, floats, 132),
            2);  // 64 rows a chunk at least
  EXPECT_EQ(cuda::column_reduce::Chunks(10000, 5000, 132, floats, 132), 1);  // 157 column blocks
  EXPECT_EQ(cuda::column_reduce::Chunks(1000000, 5, 132, floats, 132), 528);
  EXPECT_EQ(cuda::column_reduce::Chunks(1000000, 5, 132, 1000, 132), 31);  // 32 floats a chunk
  EXPECT_EQ(cuda::column_reduce::Chunks(1, 5, 132, floats, 132), 1);
  EXPECT_EQ(cuda::column_reduce::Chunks(10000, 750, 132, floats, 0), 1);  // no workspace
}

// ColumnSum and ColumnDot's kernel on host threads against the CPU: one chunk of rows, and
// several meeting in the workspace, columns past a block's edge. The same bits whichever chunk
// arrives last: every block at once (the order varies on host threads), then one block after
// another in order, in reverse and in random orders. The counts are back at zero after each
// launch.
TEST_F(EwEmulationTest, ColumnReduceKernel) {
  absl::StatusOr<Kernels*> cpu = GetKernels(core::Device::Cpu());
  ASSERT_TRUE(cpu.ok());
  void* so = Build("column_reduce", "", kColumnReduceRunner, "the column reduction");
  if (so == nullptr) return;
  using Run = void (*)(const cuda::column_reduce::Args*, const int*);
  auto run = reinterpret_cast<Run>(dlsym(so, "cavs_emu_run_column_reduce"));
  ASSERT_NE(run, nullptr);
  core::Rng rng(14);
  struct Case {
    int64_t m, w;
    int chunks;
    bool dot;
  };
  std::vector<float> partial(4096);
  std::vector<unsigned> arrivals(4, 0);
  for (const Case& c : {Case{50, 5, 1, false}, Case{300, 70, 4, false}, Case{130, 33, 3, true},
                        Case{7, 40, 5, true}}) {
    const std::string what = std::to_string(c.m) + " x " + std::to_string(c.w) + " in " +
                             std::to_string(c.chunks) + " chunks" + (c.dot ? ", dot" : "");
    const int64_t ld = c.w + 3;
    std::vector<float> x(c.m * ld), y(c.m * ld), dst0(c.w);
    for (float& v : x) v = rng.Uniform(-1.0f, 1.0f);
    for (float& v : y) v = rng.Uniform(-1.0f, 1.0f);
    for (float& v : dst0) v = rng.Uniform(-1.0f, 1.0f);
    std::vector<float> want = dst0;
    const float alpha = c.dot ? 1.0f : -0.5f;
    std::vector<double> scale(c.w);
    for (int64_t j = 0; j < c.w; ++j) {
      scale[j] = std::fabs(dst0[j]);
      for (int64_t r = 0; r < c.m; ++r) {
        const double term = c.dot ? static_cast<double>(x[r * ld + j]) * y[r * ld + j]
                                  : alpha * static_cast<double>(x[r * ld + j]);
        scale[j] += std::fabs(term);
      }
    }
    ASSERT_TRUE((c.dot ? (*cpu)->ColumnDot(x.data(), ld, y.data(), ld, c.m, c.w, want.data())
                       : (*cpu)->ColumnSum(x.data(), ld, c.m, c.w, alpha, want.data()))
                    .ok());
    ASSERT_LE(c.chunks * cuda::column_reduce::PaddedWidth(c.w),
              static_cast<int64_t>(partial.size()))
        << what;
    const int blocks = static_cast<int>((c.w + cuda::column_reduce::kColumns - 1) /
                                        cuda::column_reduce::kColumns) *
                       c.chunks;
    std::vector<std::vector<int>> orders(4, std::vector<int>(blocks));
    for (int b = 0; b < blocks; ++b) orders[0][b] = b;
    orders[1].assign(orders[0].rbegin(), orders[0].rend());
    for (int o : {2, 3}) {
      orders[o] = orders[0];
      rng.Shuffle(orders[o]);
    }
    std::vector<float> first;
    for (int launch = 0; launch < 6; ++launch) {
      std::vector<float> got = dst0;
      cuda::column_reduce::Args g{x.data(), ld,        c.dot ? y.data() : nullptr,      ld,
                                  c.m,      c.w,       (c.m + c.chunks - 1) / c.chunks, c.chunks,
                                  alpha,    got.data()};
      g.partial = partial.data();
      g.arrivals = arrivals.data();
      run(&g, launch < 2 ? nullptr : orders[launch - 2].data());
      EXPECT_EQ(arrivals, std::vector<unsigned>(4, 0)) << what << ", launch " << launch;
      if (launch == 0) {
        // The chunks and the CPU's tiles sum in other orders: within twice the float32 bound
        // of m terms, alpha's rounding and dst's add.
        EXPECT_TRUE(AllClose(got, std::vector<double>(want.begin(), want.end()),
                             2 * testing::SumErrorBound(c.m + 2), 0.0, &scale))
            << what;
        first = got;
      } else {
        EXPECT_EQ(got, first) << what << ", launch " << launch << ": not the same bits";
      }
    }
  }
}

TEST_F(EwEmulationTest, TreeLstmRounds) {
  for (int64_t rows : {1, 37}) {
    EwProgram fwd = testing::TreeLstmForward(20, rows, 1);
    Compare(fwd, "forward, rows " + std::to_string(rows));
    EwProgram bwd = testing::TreeLstmBackward(20, rows, 2);
    Compare(bwd, "backward, rows " + std::to_string(rows));
  }
}

// Every op in one program, a row sum and a broadcast through the shared row, several rows per
// block and several blocks.
TEST_F(EwEmulationTest, EveryOpSharedRowsAndRowSums) {
  core::Rng rng(3);
  EwProgram p;
  p.rows = 41;
  p.uids.resize(p.rows);
  for (int64_t r = 0; r < p.rows; ++r) p.uids[r] = static_cast<int32_t>(3 * r + 1);
  float* x = p.Buffer(p.rows * 40, rng);
  float* y = p.Buffer(p.rows * 40, rng);
  float* bias = p.Buffer(40, rng);
  for (int op = 0; op <= static_cast<int>(EwOp::kReluGrad); ++op) {
    const EwOp o = static_cast<EwOp>(op);
    if (o == EwOp::kSum || o == EwOp::kBroadcast) continue;
    p.Add(o, 8, {y + 8 * (op % 4), 40}, {x + 8 * (op % 3), 40}, {bias, 0});
    p.instrs.back().scalar = o == EwOp::kDropout ? 0.25f : 0.5f;
    p.instrs.back().offset = 0.125f;
    p.instrs.back().uids = p.uids.data();
  }
  p.Add(EwOp::kTanh, 33, Scratch(0), {x, 40});
  p.Add(EwOp::kSum, 33, Scratch(40), Scratch(0));
  p.Add(EwOp::kBroadcast, 5, {y + 33, 40}, Scratch(40));
  p.Add(EwOp::kMul, 32, {x, 40}, Scratch(1), {y, 40});  // tanh's, one column over
  const EwKernelPlan plan =
      PlanEwKernel(p.instrs.data(), static_cast<int>(p.instrs.size()), p.rows);
  ASSERT_GT(plan.shared_width, 0);
  ASSERT_GT(plan.segments.size(), 3u);
  Compare(p, "every op");
}

// The bodies a forward round's single launch runs after its GEMM: 512 threads a block.
TEST_F(EwEmulationTest, BodiesForOtherThreadCounts) {
  for (int64_t rows : {1, 37}) {
    EwProgram fwd = testing::TreeLstmForward(20, rows, 1);
    Compare(fwd, "forward, 512 threads, rows " + std::to_string(rows), 512);
  }
  core::Rng rng(5);
  for (int i = 0; i < 3; ++i) {
    EwProgram p = RandomProgram(rng, 14, 60, 40);
    Compare(p, "random program, 512 threads " + std::to_string(i), 512);
    if (HasFailure()) return;
  }
}

// A row offset: the kernel runs rows [row0, ...) of a program written for row 0 (the engine
// records one per step and runs it at each round's rows) as the CPU kernels do: the
// Tree-LSTM's rounds (pushes and pulls through row maps, dropout uids) and random programs
// (shared rows, row sums), 256 and 512 threads.
TEST_F(EwEmulationTest, RowOffsets) {
  EwProgram fwd = testing::TreeLstmForward(20, 37, 1);
  Compare(fwd, "forward from row 11", kEwKernelThreads, 11);
  EwProgram bwd = testing::TreeLstmBackward(20, 37, 2);
  Compare(bwd, "backward from row 36", kEwKernelThreads, 36);
  core::Rng rng(6);
  for (int i = 0; i < 4; ++i) {
    EwProgram p = RandomProgram(rng, 14, 60, 40);
    const int64_t row0 = p.rows / 3;
    Compare(p, "random program from row " + std::to_string(row0) + ", " + std::to_string(i),
            i % 2 == 0 ? kEwKernelThreads : 512, row0);
    if (HasFailure()) return;
  }
}

TEST_F(EwEmulationTest, RandomPrograms) {
  core::Rng rng(4);
  for (int i = 0; i < 8; ++i) {
    EwProgram p = RandomProgram(rng, 14, i < 4 ? 7 : 60, i < 4 ? 9 : 40);
    Compare(p, "random program " + std::to_string(i));
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace cavs::ops
