// The one place a benchmark binary reads the environment: the kernel options' CAVS_* overrides
// (ops/kernel_options.h), applied before any benchmark runs. The options then in force go into
// Google Benchmark's context (the header it prints first, and the JSON output's "context"), so
// that a result says how its kernels ran.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "ops/kernel_options.h"
#include "ops/kernels.h"

namespace cavs::bench {

// Call once in main, after benchmark::Initialize. An override that cannot be applied stops the
// binary.
inline void ApplyKernelEnvironment(const char* program) {
  const absl::StatusOr<std::string> line = ops::ApplyEnvironmentKernelOptions(program);
  if (!line.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, std::string(line.status().message()).c_str());
    std::exit(1);
  }
  if (!line->empty()) std::fprintf(stderr, "%s\n", line->c_str());
  benchmark::AddCustomContext("kernel_options", ops::KernelOptionsString(ops::GetKernelOptions()));
}

}  // namespace cavs::bench
