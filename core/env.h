// Switches read from the environment (CAVS_CUDA_FUSED=0, CAVS_CUBLASLT=1, ...).
#pragma once

#include <cstdlib>
#include <cstring>

namespace cavs::core {

// The switch `name`: "1" on, "0" off, anything else (or unset) `fallback`.
inline bool EnvFlag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr) return fallback;
  if (std::strcmp(v, "1") == 0) return true;
  if (std::strcmp(v, "0") == 0) return false;
  return fallback;
}

}  // namespace cavs::core
