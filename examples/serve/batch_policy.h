// BatchPolicy: when the serving queue's waiting samples become a batch.
//
// The batcher asks its policy whenever the queue changes, the executor becomes idle or the time
// the policy asked for has passed; the policy sees the queue's length, the oldest sample's wait
// and whether the executor waits for a batch, and answers how many samples to take now (0: none
// yet) and how long to wait at most before asking again. A policy is one class behind this
// interface plus a line in MakeBatchPolicy.
//
// "size-or-deadline" (the default): a batch starts when max_batch samples wait or when the
// oldest has waited max_wait, whichever comes first; it takes at most max_batch samples.
// "eager": the same, and also whenever the executor is idle: a lone request runs at once, and
// under load batches grow by themselves while the executor is busy.
// Policies are immutable after construction: Decide may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace cavs::serve {

struct BatchPolicyOptions {
  size_t max_batch = 256;
  std::chrono::microseconds max_wait{2000};
};

struct BatchDecision {
  size_t take = 0;                    // samples to batch now, from the front of the queue
  std::chrono::microseconds wait{0};  // with take == 0: ask again after this at the latest
};

class BatchPolicy {
 public:
  virtual ~BatchPolicy() = default;
  // `queued` samples wait, the oldest since `oldest_wait` (0 when none does); `executor_idle`:
  // the executor waits for this batch (nothing runs).
  virtual BatchDecision Decide(size_t queued, std::chrono::microseconds oldest_wait,
                               bool executor_idle) const = 0;
  // The largest batch it ever takes.
  virtual size_t max_batch() const = 0;
  virtual std::string name() const = 0;
};

// The policy called `name` ("size-or-deadline", "eager"); InvalidArgument listing the known
// names.
// REQUIRES: options.max_batch >= 1.
[[nodiscard]] absl::StatusOr<std::unique_ptr<BatchPolicy>> MakeBatchPolicy(
    std::string_view name, const BatchPolicyOptions& options);

}  // namespace cavs::serve
