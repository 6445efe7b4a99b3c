// Internal to distributed/: the units a GradientSynchronizer is made of, and what the kinds'
// units share. A unit is one pipeline of nonblocking operations over the gradients of one or
// more parameters; each synchronizer kind defines its own (distributed/kinds/):
//
//   allreduce bucket      pack dense gradients into one flat buffer, allreduce it (optionally
//                         as float16, pre-scaled by 1/global count), unpack; hierarchical:
//                         reduce to the host's leader, allreduce among leaders, broadcast.
//   ps shard (dense)      reduce the shard's rows to the server, then broadcast the sum back.
//   sparse allgather      allgather row counts, then rows and values; every rank sums
//                         duplicate rows itself.
//   ps shard (sparse)     gather the shard's rows to the server, which sums duplicates and
//                         broadcasts the result.
//
// Units move from Start() through Advance() (never blocking; each call polls the current stage
// and starts the next) to Complete(scale), which writes the gradient sums times `scale`. Every
// multi-stage unit owns a duplicate communicator, so that its stages may start at different
// times on different ranks without mixing the order of collectives; flat buckets share one
// communicator and are started in the same order on every rank.
//
// Thread-safety: one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/parameter.h"
#include "core/tensor.h"
#include "distributed/communicator.h"

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

// `t` itself if it lives on `device`, else a copy there.
[[nodiscard]] absl::StatusOr<core::Tensor> OnDevice(const core::Tensor& t, core::Device device);
// Multiplies a float32 tensor by `factor` with the optimizer kernels of its device.
[[nodiscard]] absl::Status ScaleInPlace(const core::Tensor& t, float factor);
// An int64 [1] host tensor holding `v`.
core::Tensor HostScalar(int64_t v);

// The operations of one stage of a unit, started together; done when all have completed.
class Stage {
 public:
  // Keeps `work`, or returns its error.
  [[nodiscard]] absl::Status Add(absl::StatusOr<std::unique_ptr<Work>> work);
  // True when all have completed. Polls them in the order they were added and stops at the
  // first still running (a completed Work answers without polling): a poll of one operation is the
  // transport's progress for all of them (Open MPI's MPI_Test runs its progress engine, which
  // advances every request), so polling each of a shard's hundreds of pieces on every call cost
  // that progress hundreds of times over.
  [[nodiscard]] absl::StatusOr<bool> Test();
  void Clear() { works_.clear(); }

 private:
  std::vector<std::unique_ptr<Work>> works_;
};

// What the row-sparse units share (a sparse allgather, a PS shard of a row-sparse gradient):
// this rank's rows of the shard [begin, end) and the exchange of every rank's count.
class SparseBase : public SyncUnit {
 public:
  // Stage 1: this rank's rows, and the count exchange (to every rank, or to counts_root).
  absl::Status Start(float) override {
    stage_ = 1;
    return StartCounts();
  }
  const SparseRows* sparse_result() const override { return &result_; }

 protected:
  // counts_root: -1, every rank learns every rank's count (an allgather); else only that rank
  // does (a gather: the others send their rows there and need no one's count but their own).
  SparseBase(std::unique_ptr<Communicator> comm, core::Parameter* p, int index, std::string name,
             int64_t begin, int64_t end, int counts_root = -1)
      : SyncUnit({index}, std::move(name)),
        comm_(std::move(comm)),
        param_(p),
        begin_(begin),
        end_(end),
        counts_root_(counts_root) {}

  // Picks this rank's rows in [begin_, end_) and starts the exchange of the counts.
  absl::Status StartCounts();
  // The counts exchanged by StartCounts, on the host: every rank's where this rank learns them,
  // else this rank's own and 0 for the others (what a GatherV's sender needs).
  absl::StatusOr<std::vector<int64_t>> Counts() const;
  // Sums duplicates of gathered rows and values (on any device) into result_ (unscaled).
  absl::Status Reduce(const core::Tensor& rows, const core::Tensor& values);

  int64_t cols() const { return param_->value.cols(); }

  std::unique_ptr<Communicator> comm_;
  core::Parameter* param_;
  int64_t begin_, end_;
  int counts_root_;
  core::Tensor my_rows_, my_values_, counts_;
  int stage_ = 0;  // the stage in flight (1: the counts); each unit numbers the ones after
  Stage stage_ops_;
  SparseRows result_;
};

// Sums the values of equal rows: returns unique ascending rows, each row's values added in the
// order they appear (so every rank that sums the same input gets the same bits).
// rows: [n]; values: float32 [n, cols] on the host.
SparseRows SumDuplicateRows(const int64_t* rows, int64_t n, const core::Tensor& values);

}  // namespace cavs::distributed::internal
