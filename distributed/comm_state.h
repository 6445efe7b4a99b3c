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

  const std::string& backend() const { return backend_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  const CommOptions& options() const { return options_; }
  core::Device buffer_device() const { return buffer_device_; }

  // OK while healthy; else FailedPrecondition quoting the first error.
  absl::Status health() const;
  // Records the first error; later ones are dropped.
  void Break(const absl::Status& error);
  bool broken() const { return !first_error_.ok(); }

  CommStats& stats() { return stats_; }
  int64_t NextSequence() { return next_sequence_++; }

 private:
  std::string backend_;
  int rank_;
  int world_size_;
  CommOptions options_;
  core::Device buffer_device_;
  absl::Status first_error_;
  CommStats stats_;
  int64_t next_sequence_ = 0;
};

// A pause between two polls of an operation in flight: yields for the first few iterations,
// then sleeps up to half a millisecond, so that waiting ranks leave the CPU to the others on an
// oversubscribed machine without adding much latency.
void PollPause(int iteration);

// A Work that completed when it was created (single-process operations).
std::unique_ptr<Work> MakeDoneWork(std::shared_ptr<CommState> state, std::string what);

}  // namespace cavs::distributed::internal
