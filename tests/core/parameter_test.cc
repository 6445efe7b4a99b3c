#include "core/parameter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/random.h"

namespace cavs::core {
namespace {

bool Contains(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(ParameterStoreTest, CreatesValueFromSeedAndNameWithZeroGradient) {
  ParameterStore store(17);
  absl::StatusOr<Parameter*> w = store.GetOrCreate("W", {3, 4}, Initializer::XavierUniform());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)->name, "W");
  EXPECT_EQ((*w)->value.shape(), Shape({3, 4}));
  Tensor want = Tensor::Host({3, 4});
  ASSERT_TRUE(InitializeTensor(want, Initializer::XavierUniform(), 17, "W").ok());
  EXPECT_EQ((*w)->value.ToVector(), want.ToVector());
  EXPECT_FALSE((*w)->sparse_grad);
  EXPECT_EQ((*w)->grad.shape(), Shape({3, 4}));
  EXPECT_EQ((*w)->grad.ToVector(), std::vector<float>(12, 0.0f));
}

TEST(ParameterStoreTest, SparseParameterStartsWithNoRows) {
  ParameterStore store;
  absl::StatusOr<Parameter*> e = store.GetOrCreate("emb", {10, 4}, Initializer::Zeros(), true);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE((*e)->sparse_grad);
  EXPECT_FALSE((*e)->grad.defined());
  EXPECT_TRUE((*e)->grad_rows.empty());
  EXPECT_EQ((*e)->grad_values.shape(), Shape({0, 4}));
  EXPECT_TRUE(ValidateGradient(**e).ok());
  absl::StatusOr<Parameter*> s = store.GetOrCreate("s", {}, Initializer::Zeros(), true);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.status(), "'s'")) << s.status();
}

TEST(ParameterStoreTest, GetExistingAndShapeMismatch) {
  ParameterStore store;
  Parameter* a = *store.GetOrCreate("tree/W", {2, 3}, Initializer::Zeros());
  absl::StatusOr<Parameter*> again = store.GetOrCreate("tree/W", {2, 3}, Initializer::Constant(1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, a);
  EXPECT_EQ(a->value.ToVector(), std::vector<float>(6, 0.0f));  // not re-initialized

  absl::StatusOr<Parameter*> bad = store.GetOrCreate("tree/W", {3, 2}, Initializer::Zeros());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(bad.status(), "'tree/W'")) << bad.status();
  EXPECT_TRUE(Contains(bad.status(), "[2, 3]")) << bad.status();
  EXPECT_TRUE(Contains(bad.status(), "[3, 2]")) << bad.status();
  absl::StatusOr<Parameter*> sparse =
      store.GetOrCreate("tree/W", {2, 3}, Initializer::Zeros(), true);
  EXPECT_TRUE(Contains(sparse.status(), "sparse")) << sparse.status();

  EXPECT_FALSE(store.GetOrCreate("", {1}, Initializer::Zeros()).ok());
  absl::StatusOr<Parameter*> neg = store.GetOrCreate("n", {2, -1}, Initializer::Zeros());
  EXPECT_TRUE(Contains(neg.status(), "'n'")) << neg.status();
  EXPECT_EQ(store.size(), 1);
}

// [2^62 + 1, 4] has 2^64 + 4 elements, which int64 arithmetic wraps to 4: the store must
// refuse the shape rather than allocate a 16-byte tensor for it.
TEST(ParameterStoreTest, RejectsShapesWhoseSizeOverflows) {
  ParameterStore store;
  for (const Shape& shape : {Shape({(int64_t{1} << 62) + 1, 4}), Shape({int64_t{1} << 61, 8}),
                             Shape({int64_t{1} << 40, int64_t{1} << 40})}) {
    absl::StatusOr<Parameter*> p = store.GetOrCreate("huge", shape, Initializer::Zeros());
    ASSERT_FALSE(p.ok()) << shape.DebugString();
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(p.status(), "'huge'")) << p.status();
    EXPECT_TRUE(Contains(p.status(), shape.DebugString())) << p.status();
  }
  EXPECT_EQ(store.size(), 0);
}

TEST(ShapeTest, CheckedNumElements) {
  EXPECT_EQ(Shape({3, 4}).CheckedNumElements(), 12);
  EXPECT_EQ(Shape(std::vector<int64_t>{}).CheckedNumElements(), 1);
  EXPECT_EQ(Shape({0, int64_t{1} << 62}).CheckedNumElements(), 0);
  EXPECT_EQ(Shape({2, -1}).CheckedNumElements(), -1);
  EXPECT_EQ(Shape({(int64_t{1} << 62) + 1, 4}).CheckedNumElements(), -1);
  EXPECT_EQ(Shape({Shape::kMaxElements}).CheckedNumElements(), Shape::kMaxElements);
  EXPECT_EQ(Shape({Shape::kMaxElements, 2}).CheckedNumElements(), -1);
}

TEST(ParameterStoreTest, ValuesIndependentOfCreationOrder) {
  ParameterStore a(5), b(5), c(6);
  ASSERT_TRUE(a.GetOrCreate("x", {4, 4}, Initializer::XavierUniform()).ok());
  ASSERT_TRUE(a.GetOrCreate("y", {4}, Initializer::Uniform(-1, 1)).ok());
  ASSERT_TRUE(b.GetOrCreate("y", {4}, Initializer::Uniform(-1, 1)).ok());
  ASSERT_TRUE(b.GetOrCreate("x", {4, 4}, Initializer::XavierUniform()).ok());
  ASSERT_TRUE(c.GetOrCreate("x", {4, 4}, Initializer::XavierUniform()).ok());
  EXPECT_EQ(a.Find("x")->value.ToVector(), b.Find("x")->value.ToVector());
  EXPECT_EQ(a.Find("y")->value.ToVector(), b.Find("y")->value.ToVector());
  EXPECT_NE(a.Find("x")->value.ToVector(), c.Find("x")->value.ToVector());
  EXPECT_NE(a.Find("x")->value.ToVector(), a.Find("y")->value.ToVector());
}

TEST(ParameterStoreTest, OrderFindAndCounts) {
  ParameterStore store;
  ASSERT_TRUE(store.GetOrCreate("b", {3}, Initializer::Zeros()).ok());
  ASSERT_TRUE(store.GetOrCreate("a", {2, 5}, Initializer::Zeros()).ok());
  ASSERT_EQ(store.size(), 2);
  EXPECT_EQ(store.parameters()[0]->name, "b");
  EXPECT_EQ(store.parameters()[1]->name, "a");
  EXPECT_EQ(store.Find("a"), store.parameters()[1].get());
  EXPECT_EQ(store.Find("c"), nullptr);
  EXPECT_EQ(store.NumElements(), 13);
}

TEST(ParameterStoreTest, ZeroGradClearsDenseAndSparse) {
  ParameterStore store;
  Parameter* w = *store.GetOrCreate("w", {2}, Initializer::Zeros());
  Parameter* e = *store.GetOrCreate("e", {4, 2}, Initializer::Zeros(), true);
  w->grad.data<float>()[1] = 3.0f;
  ASSERT_TRUE(store.AccumulateSparseGrad(e, {1}, Tensor::FromVector({1, 2}, {1, 2})).ok());
  ASSERT_TRUE(store.ZeroGrad().ok());
  EXPECT_EQ(w->grad.ToVector(), (std::vector<float>{0, 0}));
  EXPECT_TRUE(e->grad_rows.empty());
  EXPECT_EQ(e->grad_values.shape(), Shape({0, 2}));
}

TEST(ParameterStoreTest, AccumulateSparseGradMergesDuplicatesSorted) {
  ParameterStore store;
  Parameter* e = *store.GetOrCreate("e", {6, 2}, Initializer::Zeros(), true);
  ASSERT_TRUE(
      store.AccumulateSparseGrad(e, {4, 1, 4}, Tensor::FromVector({1, 2, 10, 20, 100, 200}, {3, 2}))
          .ok());
  EXPECT_EQ(e->grad_rows, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(e->grad_values.ToVector(), (std::vector<float>{10, 20, 101, 202}));
  ASSERT_TRUE(store.AccumulateSparseGrad(e, {0, 4}, Tensor::FromVector({5, 6, 7, 8}, {2, 2})).ok());
  EXPECT_EQ(e->grad_rows, (std::vector<int64_t>{0, 1, 4}));
  EXPECT_EQ(e->grad_values.ToVector(), (std::vector<float>{5, 6, 10, 20, 108, 210}));
  EXPECT_TRUE(ValidateGradient(*e).ok());
}

TEST(ParameterStoreTest, AccumulateSparseGradErrorsChangeNothing) {
  ParameterStore store;
  Parameter* e = *store.GetOrCreate("e", {3, 2}, Initializer::Zeros(), true);
  Parameter* d = *store.GetOrCreate("d", {3, 2}, Initializer::Zeros());
  ASSERT_TRUE(store.AccumulateSparseGrad(e, {2}, Tensor::FromVector({1, 1}, {1, 2})).ok());
  absl::Status s = store.AccumulateSparseGrad(e, {3}, Tensor::FromVector({1, 1}, {1, 2}));
  EXPECT_TRUE(Contains(s, "row 3 out of range [0, 3)")) << s;
  s = store.AccumulateSparseGrad(e, {-1}, Tensor::FromVector({1, 1}, {1, 2}));
  EXPECT_TRUE(Contains(s, "out of range")) << s;
  s = store.AccumulateSparseGrad(e, {0, 1}, Tensor::FromVector({1, 1}, {1, 2}));
  EXPECT_TRUE(Contains(s, "[2, 2]")) << s;
  s = store.AccumulateSparseGrad(d, {0}, Tensor::FromVector({1, 1}, {1, 2}));
  EXPECT_TRUE(Contains(s, "dense")) << s;
  EXPECT_EQ(e->grad_rows, (std::vector<int64_t>{2}));
  EXPECT_EQ(e->grad_values.ToVector(), (std::vector<float>{1, 1}));
}

TEST(ValidateGradientTest, DetectsMalformedGradients) {
  ParameterStore store;
  Parameter* e = *store.GetOrCreate("emb", {5, 2}, Initializer::Zeros(), true);
  e->grad_rows = {3, 1, 3};
  e->grad_values = Tensor::Host({3, 2});
  absl::Status s = ValidateGradient(*e);
  EXPECT_TRUE(Contains(s, "'emb'") && Contains(s, "not unique")) << s;
  e->grad_rows = {3, 5};
  e->grad_values = Tensor::Host({2, 2});
  EXPECT_TRUE(Contains(ValidateGradient(*e), "row 5 out of range")) << ValidateGradient(*e);
  e->grad_rows = {3, 1};
  EXPECT_TRUE(ValidateGradient(*e).ok());  // unique is enough; sorted is not required
  e->grad_values = Tensor::Host({2, 3});
  EXPECT_FALSE(ValidateGradient(*e).ok());

  Parameter* w = *store.GetOrCreate("w", {2, 2}, Initializer::Zeros());
  w->grad = Tensor::Host({4});
  s = ValidateGradient(*w);
  EXPECT_TRUE(Contains(s, "'w'") && Contains(s, "[2, 2]")) << s;
}

}  // namespace
}  // namespace cavs::core
