// Internal to distributed/: the units a GradientSynchronizer is made of. A unit is one
// pipeline of nonblocking operations over the gradients of one or more parameters:
//
//   BucketUnit    AllReduce group: pack dense gradients into one flat buffer, allreduce it
//                 (optionally as float16, pre-scaled by 1/global count), unpack; hierarchical:
//                 reduce to the host's leader, allreduce among leaders, broadcast in the host.
//   PsDenseUnit   one PS shard of a dense gradient: reduce the rows to the server, then
//                 broadcast the sum back (in place in the gradient).
//   SparseUnit    Sparse allgather of a row-sparse gradient: allgather row counts, then rows and
//                 values; every rank sums duplicate rows itself.
//   PsSparseUnit  one PS shard of a row-sparse gradient: gather the shard's rows to the server,
//                 which sums duplicates and broadcasts the result.
//
// Units move from Start() through Advance() (never blocking; each call polls the current stage
// and starts the next) to Complete(scale), which writes the gradient sums times `scale`. Every
// multi-stage unit owns a duplicate communicator, so that its stages may start at different
// times on different ranks without mixing the order of collectives; buckets share one
// communicator and are started in the same order on every rank.
//
// Thread-safety: one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/parameter.h"
#include "core/tensor.h"
#include "distributed/communicator.h"
#include "distributed/strategy.h"

namespace cavs::distributed::internal {

// A shard's part of a row-sparse gradient: unique ascending rows and their values on the host.
struct SparseRows {
  std::vector<int64_t> rows;
  core::Tensor values;  // float32 [rows.size(), cols], host
};

class SyncUnit {
 public:
  virtual ~SyncUnit() = default;

  // Indices (in the store's creation order) of the parameters this unit covers.
  const std::vector<int>& params() const { return params_; }
  // For errors and logs: "allreduce bucket 0 (fc/W, fc/b)".
  const std::string& name() const { return name_; }

  // Whether Start needs the global count (its payload is scaled before it is sent).
  virtual bool NeedsScaleAtStart() const { return false; }
  // Reads the gradients and starts the first stage. `prescale` is 1 / global count when
  // NeedsScaleAtStart(), else unused. REQUIRES: every parameter's gradient is final.
  [[nodiscard]] virtual absl::Status Start(float prescale) = 0;
  // Polls the current stage and starts the next one; true when the last stage is done.
  [[nodiscard]] virtual absl::StatusOr<bool> Advance() = 0;
  // Writes the sums times `scale` into the dense gradients (or keeps the sparse result).
  [[nodiscard]] virtual absl::Status Complete(float scale) = 0;
  // For row-sparse units after Complete: the shard's rows. nullptr for dense units.
  virtual const SparseRows* sparse_result() const { return nullptr; }
  // How many stages have completed so far (ever): waiting callers use it to tell a slow unit
  // from a stuck one.
  int64_t progress() const { return progress_; }

 protected:
  SyncUnit(std::vector<int> params, std::string name)
      : params_(std::move(params)), name_(std::move(name)) {}
  void Progressed() { ++progress_; }

 private:
  std::vector<int> params_;
  std::string name_;
  int64_t progress_ = 0;
};

// An AllReduce group. `comm` is shared with the other buckets and must outlive the unit.
[[nodiscard]] absl::StatusOr<std::unique_ptr<SyncUnit>> MakeBucketUnit(
    Communicator* comm, const core::ParameterStore& store, std::vector<int> params, int group,
    Compressor compressor);

// An AllReduce group with topology=hierarchical: `local` (this rank's host, leader first) and
// `leaders` (one rank per host; null on the other ranks), both this unit's own.
[[nodiscard]] absl::StatusOr<std::unique_ptr<SyncUnit>> MakeHierarchicalBucketUnit(
    std::unique_ptr<Communicator> local, std::unique_ptr<Communicator> leaders,
    const core::ParameterStore& store, std::vector<int> params, int group, Compressor compressor);

// Row shard [row_begin, row_end) of parameter `param`, served by rank `server`.
[[nodiscard]] absl::StatusOr<std::unique_ptr<SyncUnit>> MakePsUnit(
    std::unique_ptr<Communicator> comm, const core::ParameterStore& store, int param,
    int64_t row_begin, int64_t row_end, int server);

// Sparse allgather of parameter `param`.
[[nodiscard]] absl::StatusOr<std::unique_ptr<SyncUnit>> MakeSparseUnit(
    std::unique_ptr<Communicator> comm, const core::ParameterStore& store, int param);

// Sums the values of equal rows: returns unique ascending rows, each row's values added in the
// order they appear (so every rank that sums the same input gets the same bits).
// rows: [n]; values: float32 [n, cols] on the host.
SparseRows SumDuplicateRows(const int64_t* rows, int64_t n, const core::Tensor& values);

}  // namespace cavs::distributed::internal
