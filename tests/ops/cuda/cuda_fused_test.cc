// Generated fused element-wise kernels (ops/cuda/cuda_fused.h). NVRTC needs no GPU: the
// source emitted for every plan shape (the Tree-LSTM rounds, every op, random programs) is
// compiled on every machine with the CUDA toolkit. Where a GPU is present the kernels also run
// and must match the CPU kernels, and each shape compiles once.
#include "ops/cuda/cuda_fused.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "gtest/gtest.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/ew_codegen.h"
#include "tests/ops/cuda/cuda_test_util.h"
#include "tests/ops/ew_programs.h"
#include "tests/ops/ops_test_util.h"
#include "tests/testing/temp_dir.h"

namespace cavs::ops::cuda {
namespace {

using testing::AllClose;
using testing::DeviceArray;
using testing::EwProgram;
using testing::RandomProgram;
using testing::Scratch;
using testing::TreeLstmBackward;
using testing::TreeLstmForward;

constexpr int kArch = 90;  // the project's default target (sm_90); NVRTC needs no device

void ExpectCompiles(const EwProgram& p, const std::string& what) {
  const EwKernelPlan plan =
      PlanEwKernel(p.instrs.data(), static_cast<int>(p.instrs.size()), p.rows);
  const std::string name = EwKernelName(plan);
  absl::StatusOr<std::string> cubin =
      CompileCudaSource(EmitEwKernelCuda(plan, name), name + ".cu", kArch);
  ASSERT_TRUE(cubin.ok()) << what << ": " << cubin.status() << "\n" << EmitEwKernelCuda(plan, name);
  EXPECT_GT(cubin->size(), 1000u) << what;
}

TEST(CudaFusedCompileTest, TreeLstmRoundsCompile) {
  ExpectCompiles(TreeLstmForward(150, 25, 1), "Tree-LSTM forward");
  ExpectCompiles(TreeLstmBackward(150, 25, 2), "Tree-LSTM backward");
}

TEST(CudaFusedCompileTest, EveryOpCompiles) {
  core::Rng rng(3);
  for (int op = 0; op <= static_cast<int>(EwOp::kReluGrad); ++op) {
    EwProgram p;
    p.rows = 4;
    p.uids = {1, 2, 3, 4};
    float* x = p.Buffer(4 * 16, rng);
    float* y = p.Buffer(4 * 16, rng);
    const bool sum = static_cast<EwOp>(op) == EwOp::kSum;
    // From memory into scratch and back, so each op reads and writes both kinds.
    p.Add(EwOp::kCopy, 8, Scratch(0), {x, 16});
    p.Add(static_cast<EwOp>(op), 8, sum ? EwArg{y, 16} : Scratch(8), Scratch(0), {y + 8, 16});
    p.instrs.back().scalar = 0.25f;
    p.instrs.back().uids = p.uids.data();
    if (!sum) p.Add(EwOp::kCopy, 8, {x + 8, 16}, Scratch(8));
    ExpectCompiles(p, "op " + std::to_string(op));
  }
}

TEST(CudaFusedCompileTest, RandomProgramsCompile) {
  core::Rng rng(4);
  for (int i = 0; i < 25; ++i)
    ExpectCompiles(RandomProgram(rng, 12), "random " + std::to_string(i));
}

TEST(CudaFusedCompileTest, ACompileErrorCarriesTheLog) {
  absl::StatusOr<std::string> cubin =
      CompileCudaSource("extern \"C\" __global__ void k() { undeclared = 1; }", "bad.cu", kArch);
  ASSERT_FALSE(cubin.ok());
  EXPECT_EQ(cubin.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cubin.status().message().find("bad.cu"), std::string::npos) << cubin.status();
  EXPECT_NE(cubin.status().message().find("undeclared"), std::string::npos) << cubin.status();
}

// The on-disk cache: a second compile of the same source is read back; a torn or foreign entry
// (another source under the same name) is compiled again and rewritten, never returned.
TEST(CudaFusedCompileTest, KernelCacheReusesAndRepairsEntries) {
  const std::filesystem::path dir = cavs::tests::FreshTempDir("kernel_cache");
  const EwProgram p = TreeLstmForward(150, 25, 1);
  const EwKernelPlan plan =
      PlanEwKernel(p.instrs.data(), static_cast<int>(p.instrs.size()), p.rows);
  const std::string source = EmitEwKernelCuda(plan, EwKernelName(plan));
  absl::StatusOr<std::string> fresh = CompileCudaSource(source, "k.cu", kArch);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  absl::StatusOr<std::string> first = CompileCudaSourceCached(source, "k.cu", kArch, dir.string());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, *fresh);
  const std::string entry = KernelCachePath(dir.string(), source, kArch);
  ASSERT_TRUE(std::filesystem::exists(entry));
  const auto size = std::filesystem::file_size(entry);
  EXPECT_GT(size, source.size() + fresh->size());
  // Read back: the entry is the only file and it is not rewritten.
  const auto written = std::filesystem::last_write_time(entry);
  absl::StatusOr<std::string> again = CompileCudaSourceCached(source, "k.cu", kArch, dir.string());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *fresh);
  EXPECT_EQ(std::filesystem::last_write_time(entry), written);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
  // The entry is keyed by what the code depends on besides the source: the embedded headers
  // (an edit of ew_math.cuh must not load old code) and NVRTC's options, stored with it.
  {
    std::ifstream in(entry, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(bytes.find("__fmul_rn"), std::string::npos) << "ew_math.cuh is not in the entry";
    EXPECT_NE(bytes.find("--fmad=true"), std::string::npos) << "the options are not in the entry";
  }
  // Torn: compiled again, and the entry is whole again.
  std::filesystem::resize_file(entry, size / 2);
  absl::StatusOr<std::string> torn = CompileCudaSourceCached(source, "k.cu", kArch, dir.string());
  ASSERT_TRUE(torn.ok());
  EXPECT_EQ(*torn, *fresh);
  EXPECT_EQ(std::filesystem::file_size(entry), size);
  // Foreign: another source's entry at this name (a hash collision) is not returned.
  const std::string other = "extern \"C\" __global__ void other(float* x) { x[0] = 2.0f; }";
  absl::StatusOr<std::string> other_code =
      CompileCudaSourceCached(other, "o.cu", kArch, dir.string());
  ASSERT_TRUE(other_code.ok());
  std::filesystem::copy_file(KernelCachePath(dir.string(), other, kArch), entry,
                             std::filesystem::copy_options::overwrite_existing);
  absl::StatusOr<std::string> foreign =
      CompileCudaSourceCached(source, "k.cu", kArch, dir.string());
  ASSERT_TRUE(foreign.ok());
  EXPECT_EQ(*foreign, *fresh);
  std::filesystem::remove_all(dir);
}

// ---- On a GPU.

class CudaFusedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAVS_SKIP_WITHOUT_CUDA();
    absl::StatusOr<CudaKernels*> cuda = GetCudaKernels(0);
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    cuda_ = *cuda;
    was_fused_ = cuda_->fused_elementwise();
    ASSERT_TRUE(cuda_->SetFusedElementwise(true).ok());
  }
  void TearDown() override {
    if (cuda_ != nullptr) EXPECT_TRUE(cuda_->SetFusedElementwise(was_fused_).ok());
  }

  // Runs `p` on the GPU with every pointer (buffers, uids, row maps) moved into a device copy;
  // returns the buffers' device results. `ok` says whether the launch succeeded.
  std::vector<std::vector<float>> RunOnDevice(const EwProgram& p, bool* ok) {
    std::vector<std::unique_ptr<DeviceArray<float>>> dev;
    for (const auto& b : p.buffers) dev.push_back(std::make_unique<DeviceArray<float>>(*b));
    auto ints = [](const std::vector<int32_t>& v) {
      return DeviceArray<int32_t>(v.empty() ? std::vector<int32_t>{0} : v);
    };
    DeviceArray<int32_t> dev_uids = ints(p.uids), dev_push = ints(p.push_rows),
                         dev_pull = ints(p.pull_rows);
    std::vector<EwInstr> program = p.instrs;
    for (EwInstr& in : program) {
      if (in.dst.rows != nullptr) in.dst.rows = dev_push.get();
      if (in.a.rows != nullptr) in.a.rows = dev_pull.get();
      if (in.uids != nullptr) in.uids = dev_uids.get();
      for (EwArg* a : {&in.dst, &in.a, &in.b}) a->ptr = ToDevice(p, dev, a->ptr);
    }
    DeviceArray<EwInstr> dev_program(program);
    const int count = static_cast<int>(program.size());
    *ok = cuda_->Elementwise(program.data(), dev_program.get(), count, p.rows).ok();
    std::vector<std::vector<float>> out;
    for (const auto& d : dev) out.push_back(d->Download());
    return out;
  }

  // `ptr` (into one of p's buffers, or not) in the device copies `dev` of p's buffers.
  template <typename T>
  static T* ToDevice(const EwProgram& p,
                     const std::vector<std::unique_ptr<DeviceArray<float>>>& dev, T* ptr) {
    for (size_t i = 0; i < p.buffers.size() && ptr != nullptr; ++i) {
      const float* base = p.buffers[i]->data();
      if (ptr >= base && ptr < base + p.buffers[i]->size()) return dev[i]->get() + (ptr - base);
    }
    return ptr;
  }

  // Runs `p` on the GPU and on the CPU kernels; compares every buffer, element-wise results
  // within `rtol` of their value (the devices' exp and tanh differ by a few ulps).
  void Compare(const EwProgram& p, const std::string& what, double rtol = 1e-5) {
    bool ok = false;
    const std::vector<std::vector<float>> got = RunOnDevice(p, &ok);
    ASSERT_TRUE(ok) << what;
    absl::StatusOr<Kernels*> cpu = GetKernels(core::Device::Cpu());
    ASSERT_TRUE(cpu.ok());
    const int count = static_cast<int>(p.instrs.size());
    ASSERT_TRUE((*cpu)->Elementwise(p.instrs.data(), p.instrs.data(), count, p.rows).ok()) << what;
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      EXPECT_TRUE(AllClose(got[i], *p.buffers[i], rtol, 1e-6)) << what << ", buffer " << i;
    }
  }

  CudaKernels* cuda_ = nullptr;
  bool was_fused_ = true;
};

TEST_F(CudaFusedTest, TreeLstmRoundsMatchTheCpu) {
  for (int64_t rows : {1, 25, 5000}) {
    Compare(TreeLstmForward(150, rows, 5), "forward, rows " + std::to_string(rows));
    Compare(TreeLstmBackward(150, rows, 6), "backward, rows " + std::to_string(rows));
  }
}

// Small programs (one row per block), then long and wide ones: several rows per block, so the
// shared rows and the warp-per-row sums run with r > 0, over many blocks.
TEST_F(CudaFusedTest, RandomProgramsMatchTheCpu) {
  core::Rng rng(7);
  for (int i = 0; i < 200; ++i) {
    Compare(RandomProgram(rng, 12), "random program " + std::to_string(i));
    if (HasFailure()) return;
  }
  // Up to 16 ops chained over 80 columns, with row sums: the element-wise bound (1e-5) holds for
  // each op, and the GPU's expf or tanhf may differ from glibc's by an ulp, which a later
  // subtraction can magnify; the reductions' bound (1e-4) for the chain. Seen on an H100: one
  // element of 36,150 at 6e-5 (1.3e-6 absolute), program 33.
  for (int i = 0; i < 40; ++i) {
    Compare(RandomProgram(rng, 16, 3000, 80), "large random program " + std::to_string(i), 1e-4);
    if (HasFailure()) return;
  }
}

// A scratch value read across columns (shared row) and summed per row, over 5000 rows.
TEST_F(CudaFusedTest, SharedRowsAndRowSumsOverManyRows) {
  core::Rng rng(12);
  EwProgram p;
  p.rows = 5000;
  float* x = p.Buffer(5000 * 80, rng);
  float* y = p.Buffer(5000 * 80, rng);
  p.Add(EwOp::kTanh, 40, Scratch(0), {x, 80});
  p.Add(EwOp::kSum, 40, Scratch(40), Scratch(0));
  p.Add(EwOp::kBroadcast, 39, {y, 80}, Scratch(40));
  p.Add(EwOp::kMul, 39, {y + 40, 80}, Scratch(1), {y, 80});  // tanh's, one column over
  const EwKernelPlan plan = PlanEwKernel(p.instrs.data(), 4, p.rows);
  ASSERT_GT(plan.shared_width, 0);
  Compare(p, "shared rows and row sums");
}

// Without scratch operands the interpreter runs the same programs: the generated kernel must
// give the same bits (each instruction rounds as the interpreter does; no FMA across them).
TEST_F(CudaFusedTest, BitForBitTheInterpreter) {
  core::Rng rng(13);
  auto run = [&](const EwProgram& p, bool fused) {
    EXPECT_TRUE(cuda_->SetFusedElementwise(fused).ok());
    bool ok = false;
    std::vector<std::vector<float>> out = RunOnDevice(p, &ok);
    EXPECT_TRUE(ok);
    return out;
  };
  for (int i = 0; i < 60; ++i) {
    const EwProgram p = RandomProgram(rng, 16, i < 30 ? 7 : 2000, i < 30 ? 9 : 64, false);
    const auto generated = run(p, true), interpreted = run(p, false);
    for (size_t b = 0; b < generated.size(); ++b) {
      ASSERT_EQ(generated[b].size(), interpreted[b].size());
      for (size_t e = 0; e < generated[b].size(); ++e) {
        const float g = generated[b][e], t = interpreted[b][e];
        ASSERT_TRUE(std::memcmp(&g, &t, sizeof(float)) == 0 || (std::isnan(g) && std::isnan(t)))
            << "program " << i << " buffer " << b << " element " << e << ": " << g << " vs " << t;
      }
    }
  }
}

// A caller's shape skips the plan once its first launches are verified; a program that breaks
// the promise (other pointer relations under the same shape) is caught while verifying.
TEST_F(CudaFusedTest, ShapesSkipThePlanAndBrokenPromisesAreCaught) {
  EwProgram p;  // its own caches below; launches on the default stream
  p.rows = 64;
  DeviceArray<float> x(64 * 8), y(64 * 8);
  p.Add(EwOp::kTanh, 4, {x.get(), 8}, {x.get(), 8});
  p.Add(EwOp::kSigmoid, 4, {y.get(), 8}, {x.get(), 8});  // reads tanh's value: one segment
  DeviceArray<EwInstr> dev(p.instrs);
  // The uploads are queued on the backend's stream; the launches below use the default one.
  ASSERT_TRUE(testing::Backend0()->Synchronize().ok());
  int major = 0, minor = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0), cudaSuccess);
  const int arch = major * 10 + minor;
  CudaFusedElementwise own(arch, 1, /*verify_all=*/false);  // the fast path, even under CTest
  for (int i = 0; i < CudaFusedElementwise::kVerifiedLaunches + 3; ++i) {
    ASSERT_TRUE(own.Launch(nullptr, p.instrs.data(), dev.get(), 2, p.rows, 42, 0).ok());
  }
  // The first launch plans, the next kVerifiedLaunches - 1 plan again to verify, 3 skip.
  EXPECT_EQ(own.shape_hits(), 3);
  // Same ops and strides, but sigmoid now reads a column beside tanh's: another plan.
  std::vector<EwInstr> other = p.instrs;
  other[1].a.ptr = x.get() + 1;
  DeviceArray<EwInstr> dev_other(other);
  ASSERT_TRUE(testing::Backend0()->Synchronize().ok());
  CudaFusedElementwise strict(arch, 1, /*verify_all=*/false);
  ASSERT_TRUE(strict.Launch(nullptr, p.instrs.data(), dev.get(), 2, p.rows, 7, 0).ok());
  EXPECT_EQ(strict.Launch(nullptr, other.data(), dev_other.get(), 2, p.rows, 7, 0).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Every round of a shape (other rows, other pointers) reuses the kernel compiled for the first.
TEST_F(CudaFusedTest, AShapeCompilesOnce) {
  Compare(TreeLstmForward(96, 40, 8), "first");
  const int64_t compiled = cuda_->fused_kernels_compiled();
  Compare(TreeLstmForward(96, 300, 9), "second");
  Compare(TreeLstmForward(96, 17, 10), "third");
  EXPECT_EQ(cuda_->fused_kernels_compiled(), compiled);
}

}  // namespace
}  // namespace cavs::ops::cuda
