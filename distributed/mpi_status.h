// MPI error codes as absl::Status. Every MPI call in distributed/ goes through these macros (the
// communicators run with MPI_ERRORS_RETURN), so that a failure becomes a Status naming the
// call, the MPI error string, the file and the line instead of an abort inside MPI:
//
//   CAVS_MPI_RETURN_IF_ERROR(MPI_Iallreduce(MPI_IN_PLACE, p, n, type, MPI_SUM, comm, &req));
//
// Internal to distributed/ (it includes mpi.h; no MPI type appears in a public header).
#pragma once

#include <mpi.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace cavs::distributed::internal {

// The absl code for an MPI error class: bad arguments are the caller's; the rest internal.
inline absl::StatusCode MpiErrorCode(int code) {
  int error_class = code;
  MPI_Error_class(code, &error_class);
  switch (error_class) {
    case MPI_ERR_BUFFER:
    case MPI_ERR_COUNT:
    case MPI_ERR_TYPE:
    case MPI_ERR_TAG:
    case MPI_ERR_RANK:
    case MPI_ERR_ROOT:
    case MPI_ERR_TRUNCATE:
    case MPI_ERR_ARG:
      return absl::StatusCode::kInvalidArgument;
    case MPI_ERR_NO_MEM:
      return absl::StatusCode::kResourceExhausted;
    default:
      return absl::StatusCode::kInternal;
  }
}

// "MPI error in MPI_Iallreduce at distributed/mpi_communicator.cc:120: MPI_ERR_TRUNCATE: ...".
inline absl::Status MpiStatus(int code, absl::string_view call, const char* file, int line) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  const absl::string_view name = call.substr(0, call.find('('));
  return absl::Status(
      MpiErrorCode(code),
      absl::StrCat("MPI error in ", name, " at ", file, ":", line, ": ",
                   length > 0 ? std::string(text, length) : absl::StrCat("code ", code)));
}

}  // namespace cavs::distributed::internal

// The Status of an MPI call (OK on MPI_SUCCESS).
#define CAVS_MPI_STATUS(expr) \
  ::cavs::distributed::internal::MpiStatus((expr), #expr, __FILE__, __LINE__)

// Returns the error Status from the enclosing function if the MPI call fails.
#define CAVS_MPI_RETURN_IF_ERROR(expr)                                                            \
  do {                                                                                            \
    const int cavs_mpi_code_ = (expr);                                                            \
    if (cavs_mpi_code_ != MPI_SUCCESS) {                                                          \
      return ::cavs::distributed::internal::MpiStatus(cavs_mpi_code_, #expr, __FILE__, __LINE__); \
    }                                                                                             \
  } while (0)
