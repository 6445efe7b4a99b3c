// The sparse allgather synchronizer (SparseSync, distributed/strategy.h): every rank gathers
// every rank's touched rows and values of a row-sparse gradient and sums duplicate rows itself.
//
//   file      sparse
//   checks    a row-sparse gradient
//   units     one per table (UnitKind::kSparse), keyed by the parameter
//   running   allgather every rank's row count, then AllGatherV the row ids and the value rows,
//             on the table's own duplicate communicator; duplicates summed in rank order, so
//             every rank computes the same bits
//   cost      allgather(all, 8 bytes: the counts) -> allgather(all, T (8 + 4 cols)), T the
//             touched rows of one rank
//
// Thread-safety: an immutable singleton.
#pragma once

#include "distributed/kinds/kind.h"

namespace cavs::distributed::kinds {

const SyncKind& SparseAllGatherKind();

}  // namespace cavs::distributed::kinds
