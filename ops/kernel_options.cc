#include "ops/kernel_options.h"

#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace cavs::ops {

namespace {

const char* UseName(SmallGemmUse use) {
  switch (use) {
    case SmallGemmUse::kOff:
      return "off";
    case SmallGemmUse::kWhereFaster:
      return "where-faster";
    case SmallGemmUse::kEverywhere:
      return "everywhere";
  }
  return "?";
}

// Reads the environment for KernelOptionsFromEnvironment: each variable set is noted in `read`;
// `apply` takes its value and says whether it was one the variable accepts.
class Reader {
 public:
  explicit Reader(std::vector<std::string>* read) : read_(read) {}

  template <typename Apply>
  void Read(const char* name, Apply apply) {
    const char* v = std::getenv(name);
    if (v == nullptr) return;
    const bool taken = apply(std::string(v));
    read_->push_back(absl::StrCat(name, "=", v, taken ? "" : " (ignored)"));
  }

  // "1" true, "0" false, anything else not taken.
  void Flag(const char* name, bool* field) {
    Read(name, [field](const std::string& v) {
      if (v != "0" && v != "1") return false;
      *field = v == "1";
      return true;
    });
  }

 private:
  std::vector<std::string>* read_;
};

}  // namespace

std::string KernelOptionsString(const KernelOptions& o) {
  const CudaKernelOptions& c = o.cuda;
  return absl::StrCat(
      "cpu{threads=", o.cpu.threads, " packed_gemm=", o.cpu.packed_gemm,
      " packed_gemm_avx2=", o.cpu.packed_gemm_avx2, " ew_as_planned=", o.cpu.ew_as_planned,
      " ew_row_offset=", o.cpu.ew_row_offset,
      "} cuda{generated_elementwise=", c.generated_elementwise, " cublas_lt=", c.cublas_lt,
      " gemm_autotune=", c.gemm_autotune, " small_gemm=", UseName(c.small_gemm), " kernel_cache=",
      !c.kernel_cache              ? "off"
      : c.kernel_cache_dir.empty() ? "default"
                                   : c.kernel_cache_dir,
      " graphs=", c.graphs, " ew_row_offset=", c.ew_row_offset,
      "} verify_ew_shapes=", o.verify_ew_shapes);
}

EnvironmentOverride KernelOptionsFromEnvironment(const KernelOptions& base) {
  EnvironmentOverride out{base, {}};
  KernelOptions& o = out.options;
  Reader r(&out.read);
  r.Read("CAVS_NUM_THREADS", [&](const std::string& v) {
    int n = 0;
    if (!absl::SimpleAtoi(v, &n) || n <= 0) return false;
    o.cpu.threads = n;
    return true;
  });
  r.Flag("CAVS_PACKED_GEMM", &o.cpu.packed_gemm);
  r.Flag("CAVS_PACKED_GEMM_AVX2", &o.cpu.packed_gemm_avx2);
  r.Flag("CAVS_CPU_EW_AS_PLANNED", &o.cpu.ew_as_planned);
  r.Flag("CAVS_CPU_EW_ROW_OFFSET", &o.cpu.ew_row_offset);
  r.Flag("CAVS_CUDA_FUSED", &o.cuda.generated_elementwise);
  r.Flag("CAVS_CUBLASLT", &o.cuda.cublas_lt);
  r.Flag("CAVS_GEMM_AUTOTUNE", &o.cuda.gemm_autotune);
  r.Read("CAVS_SMALL_GEMM", [&](const std::string& v) {
    if (v != "0" && v != "1") return false;
    o.cuda.small_gemm = v == "1" ? SmallGemmUse::kEverywhere : SmallGemmUse::kOff;
    return true;
  });
  r.Read("CAVS_KERNEL_CACHE", [&](const std::string& v) {
    o.cuda.kernel_cache = !v.empty() && v != "0";
    if (o.cuda.kernel_cache) o.cuda.kernel_cache_dir = v;
    return true;
  });
  r.Flag("CAVS_CUDA_GRAPHS", &o.cuda.graphs);
  r.Flag("CAVS_CUDA_EW_ROW_OFFSET", &o.cuda.ew_row_offset);
  r.Flag("CAVS_VERIFY_EW_SHAPES", &o.verify_ew_shapes);
  return out;
}

}  // namespace cavs::ops
