// The batch policies' decisions, by hand: when a batch starts, how much it takes, how long the
// batcher waits otherwise.
#include "examples/serve/batch_policy.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

namespace cavs::serve {
namespace {

using std::chrono::microseconds;

std::unique_ptr<BatchPolicy> Make(const char* name) {
  absl::StatusOr<std::unique_ptr<BatchPolicy>> p =
      MakeBatchPolicy(name, {.max_batch = 8, .max_wait = microseconds(2000)});
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

TEST(BatchPolicyTest, SizeOrDeadline) {
  auto p = Make("size-or-deadline");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->max_batch(), 8u);
  // Full: at most max_batch, at once.
  EXPECT_EQ(p->Decide(20, microseconds(0), false).take, 8u);
  // The oldest waited long enough: everything waiting.
  EXPECT_EQ(p->Decide(3, microseconds(2000), false).take, 3u);
  // Neither: wait for the rest of the deadline, idle executor or not.
  for (bool idle : {false, true}) {
    const BatchDecision d = p->Decide(3, microseconds(500), idle);
    EXPECT_EQ(d.take, 0u);
    EXPECT_EQ(d.wait, microseconds(1500));
  }
  EXPECT_EQ(p->Decide(0, microseconds(0), true).take, 0u);
}

TEST(BatchPolicyTest, EagerStartsWhenTheExecutorIsIdle) {
  auto p = Make("eager");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->Decide(3, microseconds(0), true).take, 3u);
  EXPECT_EQ(p->Decide(20, microseconds(0), true).take, 8u);
  // Busy: as size-or-deadline.
  EXPECT_EQ(p->Decide(3, microseconds(500), false).take, 0u);
  EXPECT_EQ(p->Decide(3, microseconds(2000), false).take, 3u);
  EXPECT_EQ(p->Decide(0, microseconds(0), true).take, 0u);
}

TEST(BatchPolicyTest, UnknownNameListsTheKnown) {
  absl::StatusOr<std::unique_ptr<BatchPolicy>> p = MakeBatchPolicy("fifo", {});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("known: size-or-deadline, eager"), std::string::npos);
}

}  // namespace
}  // namespace cavs::serve
