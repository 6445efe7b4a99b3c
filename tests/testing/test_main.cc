// The main of every GoogleTest binary: the kernel options the environment overrides
// (ops::ApplyEnvironmentKernelOptions: CAVS_PACKED_GEMM=0, CAVS_VERIFY_EW_SHAPES=1, ...; set per
// suite by tests/*/CMakeLists.txt and by scripts/test.sh and scripts/gpu_run.sh), then the tests.
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "ops/kernels.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const absl::StatusOr<std::string> line = cavs::ops::ApplyEnvironmentKernelOptions(argv[0]);
  if (!line.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(line.status().message()).c_str());
    return 1;
  }
  if (!line->empty()) std::fprintf(stderr, "%s\n", line->c_str());
  return RUN_ALL_TESTS();
}
