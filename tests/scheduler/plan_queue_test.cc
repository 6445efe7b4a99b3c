// PlanQueue: the plans it hands out are Engine::PlanBatch's, in order, for any number of
// threads and depth; a bad batch is its own error; an early stop joins without hanging.
#include "scheduler/plan_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "core/parameter.h"
#include "core/random.h"
#include "scheduler/engine.h"
#include "tests/scheduler/random_graphs.h"
#include "vertex/models.h"

namespace cavs::scheduler {
namespace {

using Batches = std::vector<std::shared_ptr<const std::vector<Graph>>>;

class PlanQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = vertex::models::BinaryTreeLstm({.vocab = 30, .embed = 4, .hidden = 3, .classes = 2});
    ASSERT_TRUE(f.ok()) << f.status();
    f_ = std::make_unique<vertex::Function>(std::move(*f));
    store_ = std::make_unique<core::ParameterStore>(1);
    auto e = Engine::Create(f_.get(), store_.get());
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e);
  }

  // `n` batches of 1 to 12 random trees (chains every third batch).
  static Batches MakeBatches(int n, uint64_t seed) {
    core::Rng rng(seed);
    testing::RandomGraphOptions o{.vocab = 30, .classes = 2};
    Batches out;
    for (int b = 0; b < n; ++b) {
      auto graphs = std::make_shared<std::vector<Graph>>();
      const int trees = 1 + static_cast<int>(rng.UniformInt(12));
      for (int t = 0; t < trees; ++t) {
        graphs->push_back(b % 3 == 2 ? testing::RandomChain(rng, 1 + rng.UniformInt(9), o)
                                     : testing::RandomTree(rng, 1 + rng.UniformInt(9), o));
      }
      out.push_back(std::move(graphs));
    }
    return out;
  }

  static void ExpectSamePlan(const Plan& a, const Plan& b) {
    EXPECT_EQ(a.num_rows, b.num_rows);
    EXPECT_EQ(a.round_offsets, b.round_offsets);
    EXPECT_EQ(a.ints, b.ints);
    EXPECT_EQ(a.unique_tokens, b.unique_tokens);
    EXPECT_EQ(a.row_of_uid, b.row_of_uid);
    EXPECT_EQ(a.graph_offsets, b.graph_offsets);
  }

  std::unique_ptr<vertex::Function> f_;
  std::unique_ptr<core::ParameterStore> store_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(PlanQueueTest, HandsOutPlanBatchsPlansInOrder) {
  const Batches batches = MakeBatches(40, 7);
  for (int threads : {0, 1, 2, 4, 7}) {
    for (int depth : {0, 1, 3, 16}) {
      PlanQueue q(engine_.get(), static_cast<int64_t>(batches.size()),
                  [&](int64_t i) { return batches[i]; }, {.threads = threads, .depth = depth});
      EXPECT_EQ(q.threads(), threads);
      for (size_t i = 0; i < batches.size(); ++i) {
        absl::StatusOr<PlannedBatch> b = q.Next();
        ASSERT_TRUE(b.ok()) << b.status();
        EXPECT_EQ(b->index, static_cast<int64_t>(i));
        EXPECT_EQ(b->graphs, batches[i]);
        absl::StatusOr<Plan> want = engine_->PlanBatch(*batches[i]);
        ASSERT_TRUE(want.ok());
        ExpectSamePlan(b->plan, *want);
      }
      absl::StatusOr<PlannedBatch> past = q.Next();
      EXPECT_EQ(past.status().code(), absl::StatusCode::kOutOfRange) << past.status();
    }
  }
}

// Training with queued plans runs the same steps as planning inside Run.
TEST_F(PlanQueueTest, RunsWithTheQueuedPlans) {
  const Batches batches = MakeBatches(12, 8);
  RunOptions ro;
  ro.training = true;
  ro.backward = true;
  std::vector<double> losses;
  for (const auto& b : batches) {
    absl::StatusOr<RunResult> r = engine_->Run(*b, ro);
    ASSERT_TRUE(r.ok()) << r.status();
    losses.push_back(r->loss_sum);
  }
  PlanQueue q(engine_.get(), static_cast<int64_t>(batches.size()),
              [&](int64_t i) { return batches[i]; }, {.threads = 3});
  for (size_t i = 0; i < batches.size(); ++i) {
    absl::StatusOr<PlannedBatch> b = q.Next();
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<RunResult> r = engine_->Run(*b->graphs, ro, b->plan);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->loss_sum, losses[i]) << i;
  }
}

// A batch with a cycle, or no batch at all, is that batch's error; the others plan as usual.
TEST_F(PlanQueueTest, ABadBatchIsItsOwnError) {
  Batches batches = MakeBatches(9, 9);
  auto cyclic = std::make_shared<std::vector<Graph>>(*batches[4]);
  Graph g;
  g.child_offsets = {0, 1, 2};
  g.child_ids = {1, 0};
  cyclic->push_back(g);
  batches[4] = cyclic;
  batches[6] = nullptr;
  for (int threads : {0, 2}) {
    PlanQueue q(engine_.get(), static_cast<int64_t>(batches.size()),
                [&](int64_t i) { return batches[i]; }, {.threads = threads});
    for (size_t i = 0; i < batches.size(); ++i) {
      absl::StatusOr<PlannedBatch> b = q.Next();
      if (i == 4) {
        ASSERT_FALSE(b.ok());
        const std::string sample = "sample " + std::to_string(cyclic->size() - 1);
        EXPECT_NE(b.status().message().find(sample), std::string::npos) << b.status();
        EXPECT_NE(b.status().message().find("cycle"), std::string::npos) << b.status();
      } else if (i == 6) {
        ASSERT_FALSE(b.ok());
        EXPECT_NE(b.status().message().find("batch 6"), std::string::npos) << b.status();
      } else {
        EXPECT_TRUE(b.ok()) << i << ": " << b.status();
      }
    }
  }
}

// Dropping a queue with plans under way and batches never taken returns: no new plan starts,
// and the source is never asked for more than `depth` batches beyond those taken.
TEST_F(PlanQueueTest, StopsEarlyWithoutHanging) {
  const Batches batches = MakeBatches(8, 10);
  std::atomic<int64_t> asked{0}, highest{-1};
  {
    PlanQueue q(engine_.get(), 1'000'000,
                [&](int64_t i) {
                  ++asked;
                  int64_t h = highest.load();
                  while (i > h && !highest.compare_exchange_weak(h, i)) {
                  }
                  std::this_thread::sleep_for(std::chrono::milliseconds(1));
                  return batches[i % batches.size()];
                },
                {.threads = 3, .depth = 5});
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.Next().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  EXPECT_LE(highest.load(), 3 + 5 - 1);
  EXPECT_EQ(asked.load(), highest.load() + 1);
}

TEST_F(PlanQueueTest, NoBatches) {
  PlanQueue q(engine_.get(), 0, [](int64_t) { return nullptr; }, {.threads = 4});
  EXPECT_EQ(q.threads(), 0);
  EXPECT_EQ(q.Next().status().code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace cavs::scheduler
