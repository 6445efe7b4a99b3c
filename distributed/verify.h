// VerifyConsistent: the check, before the first step, that every rank holds the same strategy
// and the same parameters (names, order, shapes, dtypes, dense or row-sparse gradients).
//
// Each rank describes its strategy and parameters as text, and the ranks allgather a hash of it;
// only when the hashes differ do they allgather the descriptions themselves, so that every rank
// finds the same first mismatch (by parameter position, then name, shape, synchronizer) and
// returns the same FailedPrecondition naming the parameter and both ranks' values, e.g.
//   ranks disagree: parameter 'fc/W': rank 0 has float32[8, 6] dense, rank 2 has float32[8, 7]
//   dense
// The ranks' communicators must also cut PS shards alike (Communicator::PieceBytes). A strategy
// that does not fit this rank's parameters (ValidateStrategy) fails the same way on every rank.
// Collective; bounded by the communicator's timeout, so a missing rank is a DeadlineExceeded,
// never a hang.
//
// FirstDifference is the hash-and-allgather under it, for any settings the ranks must share (the
// trainer's flags and data).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/parameter.h"
#include "distributed/communicator.h"
#include "distributed/strategy.h"

namespace cavs::distributed {

// Where one rank's values first differ from rank 0's.
struct RankDifference {
  int64_t index;  // into the values
  int rank;
};

// Whether every rank holds the same `values` (the same count on every rank): each value's
// FNV-1a hash and length are allgathered, and the first difference found, values in order, then
// ranks in order; none where all agree. The same answer on every rank. Collective.
[[nodiscard]] absl::StatusOr<std::optional<RankDifference>> FirstDifference(
    Communicator& comm, const std::vector<std::string>& values);

[[nodiscard]] absl::Status VerifyConsistent(Communicator& comm, const Strategy& strategy,
                                            const core::ParameterStore& store);

}  // namespace cavs::distributed
