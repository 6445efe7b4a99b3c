// ops::KernelOptions: the environment override (the one place the CAVS_* variables are read),
// its description, and the process-wide setting reaching the CPU kernels.
#include "ops/kernel_options.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ops/cpu/cpu_packed_gemm.h"
#include "ops/cpu/cpu_parallel.h"
#include "ops/kernels.h"

namespace cavs::ops {
namespace {

// Sets (or, with a null value, unsets) a variable for one test and restores what was there
// (CTest sets CAVS_VERIFY_EW_SHAPES for every test).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    had_ = std::getenv(name) != nullptr;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(KernelOptionsTest, EveryVariableSetsItsField) {
  const ScopedEnv env[] = {{"CAVS_NUM_THREADS", "3"},       {"CAVS_PACKED_GEMM", "0"},
                           {"CAVS_CPU_EW_AS_PLANNED", "1"}, {"CAVS_CUDA_FUSED", "0"},
                           {"CAVS_CUBLASLT", "0"},          {"CAVS_GEMM_AUTOTUNE", "1"},
                           {"CAVS_SMALL_GEMM", "1"},        {"CAVS_KERNEL_CACHE", "/tmp/kc"},
                           {"CAVS_CUDA_GRAPHS", "0"},       {"CAVS_VERIFY_EW_SHAPES", "1"},
                           {"CAVS_CPU_EW_ROW_OFFSET", "0"}, {"CAVS_CUDA_EW_ROW_OFFSET", "0"},
                           {"CAVS_PACKED_GEMM_AVX2", "1"}};
  const EnvironmentOverride o = KernelOptionsFromEnvironment();
  EXPECT_EQ(o.options.cpu.threads, 3);
  EXPECT_FALSE(o.options.cpu.packed_gemm);
  EXPECT_TRUE(o.options.cpu.packed_gemm_avx2);
  EXPECT_TRUE(o.options.cpu.ew_as_planned);
  EXPECT_FALSE(o.options.cpu.ew_row_offset);
  EXPECT_FALSE(o.options.cuda.generated_elementwise);
  EXPECT_FALSE(o.options.cuda.cublas_lt);
  EXPECT_TRUE(o.options.cuda.gemm_autotune);
  EXPECT_EQ(o.options.cuda.small_gemm, SmallGemmUse::kEverywhere);
  EXPECT_TRUE(o.options.cuda.kernel_cache);
  EXPECT_EQ(o.options.cuda.kernel_cache_dir, "/tmp/kc");
  EXPECT_FALSE(o.options.cuda.graphs);
  EXPECT_FALSE(o.options.cuda.ew_row_offset);
  EXPECT_TRUE(o.options.verify_ew_shapes);
  EXPECT_EQ(o.read.size(), 13u);
  EXPECT_EQ(o.read[0], "CAVS_NUM_THREADS=3");
}

// A value a variable does not take leaves the field alone and is reported as ignored; "0" turns
// the kernel cache off and the small GEMM nowhere.
TEST(KernelOptionsTest, OtherValuesAreIgnoredAndSaidSo) {
  const ScopedEnv env[] = {{"CAVS_NUM_THREADS", "many"},        {"CAVS_PACKED_GEMM", "yes"},
                           {"CAVS_CPU_EW_AS_PLANNED", nullptr}, {"CAVS_CPU_EW_ROW_OFFSET", nullptr},
                           {"CAVS_CUDA_FUSED", nullptr},        {"CAVS_CUBLASLT", nullptr},
                           {"CAVS_GEMM_AUTOTUNE", nullptr},     {"CAVS_SMALL_GEMM", "0"},
                           {"CAVS_KERNEL_CACHE", "0"},          {"CAVS_CUDA_GRAPHS", nullptr},
                           {"CAVS_VERIFY_EW_SHAPES", nullptr}};
  KernelOptions base;
  base.cpu.threads = 2;
  const EnvironmentOverride o = KernelOptionsFromEnvironment(base);
  EXPECT_EQ(o.options.cpu.threads, 2);
  EXPECT_TRUE(o.options.cpu.packed_gemm);
  EXPECT_FALSE(o.options.cuda.kernel_cache);
  EXPECT_EQ(o.options.cuda.small_gemm, SmallGemmUse::kOff);
  EXPECT_EQ(o.read, (std::vector<std::string>{"CAVS_NUM_THREADS=many (ignored)",
                                              "CAVS_PACKED_GEMM=yes (ignored)", "CAVS_SMALL_GEMM=0",
                                              "CAVS_KERNEL_CACHE=0"}));
}

TEST(KernelOptionsTest, StringNamesEverySetting) {
  KernelOptions o;
  o.cuda.small_gemm = SmallGemmUse::kOff;
  o.cuda.kernel_cache = false;
  EXPECT_EQ(KernelOptionsString(o),
            "cpu{threads=0 packed_gemm=1 packed_gemm_avx2=0 ew_as_planned=0 ew_row_offset=1} "
            "cuda{generated_elementwise=1 cublas_lt=1 gemm_autotune=0 small_gemm=off "
            "kernel_cache=off graphs=1 ew_row_offset=1} "
            "verify_ew_shapes=0");
}

// SetKernelOptions reaches the CPU kernels (threads) and is what GetKernelOptions returns.
TEST(KernelOptionsTest, SetReachesTheCpuKernels) {
  const KernelOptions before = GetKernelOptions();
  KernelOptions o = before;
  o.cpu.threads = 3;
  ASSERT_TRUE(SetKernelOptions(o).ok());
  EXPECT_EQ(cpu::CpuThreads(), 3);
  EXPECT_EQ(GetKernelOptions(), o);
  ASSERT_TRUE(SetKernelOptions(before).ok());
  EXPECT_EQ(GetKernelOptions(), before);
}

}  // namespace
}  // namespace cavs::ops
