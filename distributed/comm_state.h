// Internal to distributed/: the state a communicator shares with its duplicates and Works
// (identity, options, health, traffic counters), and helpers for backends.
//
// Thread-safety: as the communicator (one thread at a time).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/device.h"
#include "distributed/communicator.h"

namespace cavs::distributed::internal {

class CommState {
 public:
  CommState(std::string backend, int rank, int world_size, CommOptions options,
            core::Device buffer_device)
      : backend_(std::move(backend)),
        rank_(rank),
        world_size_(world_size),
        options_(options),
        buffer_device_(buffer_device) {}
  // The state of a sub-communicator of `parent`'s (Communicator::Split): its own ranks, the
  // parent's options, and the health and traffic counters of the root communicator, so that a
  // failure anywhere breaks them all and every byte is counted once.
  CommState(std::shared_ptr<CommState> parent, std::string label, int rank, int world_size)
      : backend_(absl::StrCat(parent->backend_, " ", label)),
        rank_(rank),
        world_size_(world_size),
        options_(parent->options_),
        buffer_device_(parent->buffer_device_),
        root_(parent->root_ != nullptr ? parent->root_ : parent) {}

  const std::string& backend() const { return backend_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  const CommOptions& options() const { return options_; }
  core::Device buffer_device() const { return buffer_device_; }
  // "rank 1 of 4", and for a sub-communicator also the rank in the root: "rank 1 of 2 (rank 3
  // of 4 in the job)".
  std::string Who() const;

  // OK while healthy; else FailedPrecondition quoting the first error.
  absl::Status health() const;
  // Records the first error; later ones are dropped.
  void Break(const absl::Status& error);
  bool broken() const { return root_ != nullptr ? root_->broken() : !first_error_.ok(); }

  CommStats& stats() { return root_ != nullptr ? root_->stats() : stats_; }
  int64_t NextSequence() { return next_sequence_++; }

 private:
  std::string backend_;
  int rank_;
  int world_size_;
  CommOptions options_;
  core::Device buffer_device_;
  std::shared_ptr<CommState> root_;  // null for a root communicator
  absl::Status first_error_;
  CommStats stats_;
  int64_t next_sequence_ = 0;
};

// A pause between two polls of an operation in flight: yields for the first few iterations,
// then sleeps up to half a millisecond, so that waiting ranks leave the CPU to the others on an
// oversubscribed machine without adding much latency.
void PollPause(int iteration);

// An id of the host this process runs on: a hash of its host name and its network namespace.
// Processes of one machine share both; the hosts of the emulated cluster (docs/cluster.md)
// share the machine's name but each has its own network namespace. (MPI_Comm_split_type's
// shared-memory split would say the same, but Open MPI 4.1 crashes in it when the hosts are
// namespaces of one machine.)
absl::StatusOr<int64_t> HostKey();

// A Work that completed when it was created (single-process operations).
std::unique_ptr<Work> MakeDoneWork(std::shared_ptr<CommState> state, std::string what);

}  // namespace cavs::distributed::internal
