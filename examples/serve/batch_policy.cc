#include "examples/serve/batch_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace cavs::serve {
namespace {

class SizeOrDeadline : public BatchPolicy {
 public:
  explicit SizeOrDeadline(const BatchPolicyOptions& o) : options_(o) {}

  BatchDecision Decide(size_t queued, std::chrono::microseconds oldest_wait,
                       bool /*executor_idle*/) const override {
    if (queued >= options_.max_batch) return {options_.max_batch, {}};
    if (queued > 0 && oldest_wait >= options_.max_wait) return {queued, {}};
    // Nothing waits: any wait will do, the next arrival asks again.
    if (queued == 0) return {0, std::chrono::hours(1)};
    return {0, options_.max_wait - oldest_wait};
  }
  size_t max_batch() const override { return options_.max_batch; }
  std::string name() const override { return "size-or-deadline"; }

 protected:
  const BatchPolicyOptions options_;
};

class Eager final : public SizeOrDeadline {
 public:
  using SizeOrDeadline::SizeOrDeadline;

  BatchDecision Decide(size_t queued, std::chrono::microseconds oldest_wait,
                       bool executor_idle) const override {
    if (executor_idle && queued > 0) return {std::min(queued, options_.max_batch), {}};
    return SizeOrDeadline::Decide(queued, oldest_wait, executor_idle);
  }
  std::string name() const override { return "eager"; }
};

}  // namespace

absl::StatusOr<std::unique_ptr<BatchPolicy>> MakeBatchPolicy(std::string_view name,
                                                             const BatchPolicyOptions& options) {
  if (name == "size-or-deadline") return std::make_unique<SizeOrDeadline>(options);
  if (name == "eager") return std::make_unique<Eager>(options);
  return absl::InvalidArgumentError(absl::StrCat(
      "--batch-policy: unknown policy '", std::string(name), "'; known: size-or-deadline, eager"));
}

}  // namespace cavs::serve
