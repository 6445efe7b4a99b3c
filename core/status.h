// Status helpers and invariant checks.
//
// Two kinds of failure, kept apart as in PyTorch c10:
//   - bad user input (files, graphs, shapes, ranks, devices): an absl::Status returned to the
//     caller, propagated with CAVS_RETURN_IF_ERROR / CAVS_ASSIGN_OR_RETURN;
//   - a broken invariant (a bug in cavs): CAVS_CHECK prints the condition, file and line and
//     aborts. CAVS_DCHECK does the same in debug builds only.
// Debian's Abseil (20220623) ships no status macros, so they are defined here, once.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace cavs::core::internal {

[[noreturn]] inline void CheckFailed(const char* cond, const char* file, int line,
                                     const std::string& msg) {
  std::fprintf(stderr, "cavs: internal check failed: %s at %s:%d %s\n", cond, file, line,
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}

inline absl::Status AsStatus(absl::Status s) { return s; }
template <typename T>
absl::Status AsStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

}  // namespace cavs::core::internal

namespace cavs::core {

// `s` with "`prefix`: " before its message and the same code: where a failure happened, said by
// the caller that knows ("probing the cluster: ...", "file.txt line 3: ...").
inline absl::Status Prefixed(absl::string_view prefix, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(prefix, ": ", s.message()));
}

}  // namespace cavs::core

#define CAVS_STATUS_CONCAT_INNER(a, b) a##b
#define CAVS_STATUS_CONCAT(a, b) CAVS_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status or StatusOr) is not OK.
#define CAVS_RETURN_IF_ERROR(expr)                                          \
  do {                                                                      \
    ::absl::Status cavs_status_ = ::cavs::core::internal::AsStatus((expr)); \
    if (!cavs_status_.ok()) return cavs_status_;                            \
  } while (0)

// `CAVS_ASSIGN_OR_RETURN(auto x, F());` assigns the value of a StatusOr or returns its error.
#define CAVS_ASSIGN_OR_RETURN(lhs, expr) \
  CAVS_ASSIGN_OR_RETURN_IMPL(CAVS_STATUS_CONCAT(cavs_statusor_, __LINE__), lhs, expr)
#define CAVS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

// Invariant checks: a failure is a bug in cavs, never a user error.
#define CAVS_CHECK(cond, ...)                                                             \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      ::cavs::core::internal::CheckFailed(#cond, __FILE__, __LINE__,                      \
                                          ::absl::StrCat("" __VA_OPT__(, ) __VA_ARGS__)); \
    }                                                                                     \
  } while (0)

#ifdef NDEBUG
#define CAVS_DCHECK(cond, ...) \
  do {                         \
  } while (0)
#else
#define CAVS_DCHECK(cond, ...) CAVS_CHECK(cond __VA_OPT__(, ) __VA_ARGS__)
#endif
