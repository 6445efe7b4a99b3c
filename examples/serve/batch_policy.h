// BatchPolicy: when the serving queue's waiting samples become a batch.
//
// The batcher asks its policy whenever the queue changes or the time the policy asked for has
// passed; the policy sees only the queue's length and the oldest sample's wait, and answers how
// many samples to take now (0: none yet) and how long to wait at most before asking again. A
// policy is one file pair behind this interface plus a line in MakeBatchPolicy.
//
// "size-or-deadline" (the default): a batch starts when max_batch samples wait or when the
// oldest has waited max_wait, whichever comes first; it takes at most max_batch samples.
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
  // `queued` samples wait, the oldest since `oldest_wait` (0 when none does).
  virtual BatchDecision Decide(size_t queued, std::chrono::microseconds oldest_wait) const = 0;
  // The largest batch it ever takes.
  virtual size_t max_batch() const = 0;
  virtual std::string name() const = 0;
};

// The policy called `name` ("size-or-deadline"); InvalidArgument listing the known names.
// REQUIRES: options.max_batch >= 1.
[[nodiscard]] absl::StatusOr<std::unique_ptr<BatchPolicy>> MakeBatchPolicy(
    std::string_view name, const BatchPolicyOptions& options);

}  // namespace cavs::serve
