#include "distributed/profiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/initializer.h"
#include "core/parameter.h"

namespace cavs::distributed {
namespace {

// Two steps (the first skipped), one process: forward ends at the first gradient's MarkReady,
// each parameter's ready offset counts from there, a row-sparse table's touched rows are kept,
// an unreported gradient is ready at the end of backward.
TEST(BuildModelProfileTest, TimesAndRowsFromProfiledSteps) {
  core::ParameterStore store;
  ASSERT_TRUE(store.GetOrCreate("E", core::Shape({100, 8}), core::Initializer::Zeros(), true).ok());
  ASSERT_TRUE(store.GetOrCreate("W", core::Shape({8, 4}), core::Initializer::Zeros()).ok());
  ASSERT_TRUE(store.GetOrCreate("b", core::Shape({4}), core::Initializer::Zeros()).ok());
  StepTimes warm, step;
  warm.compute = 9;  // ignored: the first step
  warm.ready_at = {1, 1, 1};
  warm.touched_rows = {99, 0, 0};
  warm.union_rows = {99, 0, 0};
  step.compute = 0.010;
  step.finish = 0.002;
  step.optimizer = 0.001;
  step.hooks = 0.003;
  step.overlap = 0.006;
  step.overlap_hooks = 0.002;
  step.ready_at = {0.009, 0.004, -1};  // b not reported
  step.touched_rows = {30, 0, 0};
  step.union_rows = {30, 0, 0};
  // The spread: the 30 rows are 0..29, counted below each of SpreadEdges(100).
  const std::vector<int64_t> edges = SpreadEdges(100);
  ASSERT_EQ(edges, (std::vector<int64_t>{1, 3, 6, 12, 25, 37, 50, 62, 75, 87}));
  std::vector<int64_t> below;
  for (int64_t e : edges) below.push_back(std::min<int64_t>(e, 30));
  step.touched_below = {below, {}, {}};
  step.union_below = {below, {}, {}};
  absl::StatusOr<ModelProfile> p = BuildModelProfile(nullptr, store, {warm, step}, 25, "m");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name, "m");
  EXPECT_EQ(p->batch_per_rank, 25);
  EXPECT_DOUBLE_EQ(p->forward_ms, 4.0);
  EXPECT_DOUBLE_EQ(p->backward_ms, 6.0);
  EXPECT_DOUBLE_EQ(p->optimizer_ms, 1.0);
  EXPECT_DOUBLE_EQ(p->hooks_ms, 3.0);
  EXPECT_DOUBLE_EQ(p->overlap_ms, 6.0);
  EXPECT_DOUBLE_EQ(p->overlap_hooks_ms, 2.0);
  ASSERT_EQ(p->params.size(), 3u);
  EXPECT_TRUE(p->params[0].sparse);
  EXPECT_EQ(p->params[0].shape, std::vector<int64_t>({100, 8}));
  EXPECT_DOUBLE_EQ(p->params[0].touched_rows, 30);
  EXPECT_TRUE(p->params[0].union_rows.empty());  // one rank: no overlap to measure
  ASSERT_EQ(p->params[0].spread.size(), edges.size());
  EXPECT_EQ(p->params[0].spread[4], (ParamProfile::SpreadPoint{25, 25.0 / 30, 25.0 / 30}));
  EXPECT_EQ(p->params[0].spread[5], (ParamProfile::SpreadPoint{37, 1.0, 1.0}));
  EXPECT_DOUBLE_EQ(p->params[0].TouchedIn(0, 37), 30.0);
  EXPECT_TRUE(p->params[1].spread.empty());
  ASSERT_TRUE(p->params[0].ready_ms.has_value());
  EXPECT_NEAR(*p->params[0].ready_ms, 5.0, 1e-9);
  EXPECT_NEAR(*p->params[1].ready_ms, 0.0, 1e-9);
  EXPECT_FALSE(p->params[2].ready_ms.has_value());
  EXPECT_EQ(p->params[2].shape, std::vector<int64_t>({4}));
  // Steps that were not profiled are an error.
  EXPECT_FALSE(BuildModelProfile(nullptr, store, {StepTimes{}}, 25, "m").ok());
}

}  // namespace
}  // namespace cavs::distributed
