// Bad input to the tracing DSL (vertex/builder.h) is an InvalidArgument from Define naming the
// function and what the user wrote, never a Function that crashes or misbehaves later.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "vertex/vertex.h"

namespace cavs::vertex {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// The message of Define's error; fails the test if Define succeeded or the code is not
// InvalidArgument.
template <typename Body>
std::string DefineError(const std::string& name, Body body) {
  absl::StatusOr<Function> f = Define(name, body);
  EXPECT_FALSE(f.ok()) << name << " should not define";
  if (f.ok()) return "";
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
  return std::string(f.status().message());
}

// The engine reads an empty field name as "no field"; it must never get past Define.
TEST(BuilderTest, EmptyFieldNameIsRejected) {
  EXPECT_THAT(DefineError("scatter_empty",
                          [](Vertex& v) {
                            Expr h = Tanh(v.pull(2));
                            v.scatter({{"", h}});
                            v.push(h);
                          }),
              AllOf(HasSubstr("vertex function 'scatter_empty'"), HasSubstr("scatter"),
                    HasSubstr("non-empty name")));
  EXPECT_THAT(DefineError("gather_empty",
                          [](Vertex& v) {
                            Expr h = Tanh(v.pull(2) + v.gather(0)[""]);
                            v.scatter({{"", h}});
                            v.push(h);
                          }),
              AllOf(HasSubstr("vertex function 'gather_empty'"), HasSubstr("gather(0)[\"\"]"),
                    HasSubstr("non-empty name")));
  EXPECT_THAT(DefineError("reduce_empty",
                          [](Vertex& v) {
                            Expr h = Tanh(v.pull(2) + v.gather_sum()[""]);
                            v.scatter({{"h", h}});
                          }),
              AllOf(HasSubstr("vertex function 'reduce_empty'"), HasSubstr("gather_sum()[\"\"]"),
                    HasSubstr("non-empty name")));
}

TEST(BuilderTest, EmptyParameterNameIsRejected) {
  EXPECT_THAT(DefineError("empty_param",
                          [](Vertex& v) {
                            v.push(MatMul(v.pull(2), v.param("", {2, 3})));
                          }),
              AllOf(HasSubstr("vertex function 'empty_param'"), HasSubstr("param(\"\", [2, 3])"),
                    HasSubstr("non-empty name")));
  EXPECT_THAT(DefineError("empty_table", [](Vertex& v) { v.push(v.embed("", 5, 3)); }),
              AllOf(HasSubstr("vertex function 'empty_table'"), HasSubstr("embed(\"\", [5, 3])"),
                    HasSubstr("non-empty name")));
}

// [2^62 + 1, 4] has 2^64 + 4 elements, which wrap to 4 in int64.
TEST(BuilderTest, ParameterWhoseSizeOverflowsIsRejected) {
  EXPECT_THAT(
      DefineError("huge_table", [](Vertex& v) { v.push(v.embed("E", (int64_t{1} << 62) + 1, 4)); }),
      AllOf(HasSubstr("vertex function 'huge_table'"), HasSubstr("parameter 'E'"),
            HasSubstr("[4611686018427387905, 4]"), HasSubstr("elements")));
  EXPECT_THAT(DefineError("huge_weight",
                          [](Vertex& v) {
                            v.push(MatMul(v.pull(8), v.param("W", {int64_t{1} << 61, 8})));
                          }),
              AllOf(HasSubstr("vertex function 'huge_weight'"), HasSubstr("parameter 'W'"),
                    HasSubstr("elements")));
  // Fits in int64 but makes a row no batch could hold: caught where the row is made.
  EXPECT_THAT(DefineError("wide_out",
                          [](Vertex& v) {
                            v.push(MatMul(v.pull(3), v.param("W", {3, int64_t{1} << 40})));
                          }),
              AllOf(HasSubstr("vertex function 'wide_out'"), HasSubstr("MatMul"),
                    HasSubstr("row width 1099511627776 exceeds the limit of 16777216")));
}

TEST(BuilderTest, WidthsAndChildSlotsAreBounded) {
  EXPECT_THAT(DefineError("huge_pull", [](Vertex& v) { v.push(Sum(v.pull(int64_t{1} << 40))); }),
              AllOf(HasSubstr("vertex function 'huge_pull'"), HasSubstr("pull(1099511627776)"),
                    HasSubstr("16777216")));
  EXPECT_TRUE(Define("max_pull", [](Vertex& v) { v.push(Sum(v.pull(kMaxWidth))); }).ok());
  EXPECT_THAT(DefineError("wide_concat",
                          [](Vertex& v) {
                            Expr x = v.pull(kMaxWidth);
                            v.push(Concat({x, x}));
                          }),
              AllOf(HasSubstr("Concat"), HasSubstr("row width 33554432")));
  for (int slot : {INT_MAX - 1, INT_MAX, kMaxChildSlots}) {
    EXPECT_THAT(DefineError("huge_slot",
                            [slot](Vertex& v) {
                              Expr h = Tanh(v.pull(3) + v.gather(slot)["h"]);
                              v.scatter({{"h", h}});
                            }),
                AllOf(HasSubstr("vertex function 'huge_slot'"),
                      HasSubstr(absl::StrCat("gather(", slot, ")")), HasSubstr("below 4096")));
  }
  absl::StatusOr<Function> last = Define("last_slot", [](Vertex& v) {
    Expr h = Tanh(v.pull(3) + v.gather(kMaxChildSlots - 1)["h"]);
    v.scatter({{"h", h}});
  });
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->max_arity(), kMaxChildSlots);
}

// Every Define's Builder sits at the same stack address; a kept Expr must still be foreign.
TEST(BuilderTest, ExprFromFinishedDefineIsRejected) {
  Expr saved;
  State saved_state(0, false, 0, Reduce::kSum);
  ASSERT_TRUE(Define("a", [&](Vertex& v) {
                saved = v.pull(3);
                saved_state = v.gather(0);
                v.push(saved);
              }).ok());
  const auto foreign = HasSubstr("an expression from another function or a finished Define");
  EXPECT_THAT(DefineError("b", [&](Vertex& v) { v.push(Tanh(saved)); }),
              AllOf(HasSubstr("vertex function 'b'"), HasSubstr("Tanh"), foreign));
  EXPECT_THAT(DefineError("c", [&](Vertex& v) { v.push(saved + v.pull(3)); }),
              AllOf(HasSubstr("vertex function 'c'"), HasSubstr("Add"), foreign));
  EXPECT_THAT(DefineError("d",
                          [&](Vertex& v) {
                            Expr x = v.pull(3);
                            v.push(Tanh(MatMul(x, v.param("W", {3, 3}))) + saved);
                          }),
              AllOf(HasSubstr("vertex function 'd'"), foreign));
  EXPECT_THAT(DefineError("e", [&](Vertex& v) { v.push(saved); }),
              AllOf(HasSubstr("vertex function 'e'"), HasSubstr("push"), foreign));
  EXPECT_THAT(DefineError("f",
                          [&](Vertex& v) {
                            Expr h = Tanh(v.pull(3) + saved_state["h"]);
                            v.scatter({{"h", h}});
                          }),
              AllOf(HasSubstr("vertex function 'f'"), HasSubstr("gather(0)[\"h\"]"),
                    HasSubstr("another function or a finished Define")));
}

// The error belongs to the function being defined, whichever operand is foreign; the other
// function is unharmed.
TEST(BuilderTest, ForeignOperandIsAnErrorOfTheInnerFunction) {
  for (bool foreign_first : {true, false}) {
    absl::Status inner;
    absl::StatusOr<Function> outer = Define("outer", [&](Vertex& v) {
      Expr x = v.pull(3);
      inner = Define("inner", [&](Vertex& w) {
                Expr y = w.pull(3);
                w.push(foreign_first ? x + y : y + x);
              }).status();
      v.push(Tanh(x));
    });
    EXPECT_TRUE(outer.ok()) << outer.status();
    EXPECT_EQ(inner.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(inner.message()),
                AllOf(HasSubstr("vertex function 'inner'"), HasSubstr("Add"),
                      HasSubstr("another function or a finished Define")));
  }
}

TEST(BuilderTest, SliceRejectsBadColumnsAndSplitStillWorks) {
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, -2}, {1, -1}, {-1, 2}, {2, 2}, {3, 1}}) {
    EXPECT_THAT(
        DefineError("slice", [begin, end](Vertex& v) { v.push(Slice(v.pull(4), begin, end)); }),
        AllOf(HasSubstr("vertex function 'slice'"),
              HasSubstr(absl::StrCat("Slice(x, ", begin, ", ", end, ")")),
              HasSubstr("0 <= begin < end")));
  }
  EXPECT_THAT(
      DefineError("slice_past", [](Vertex& v) { v.push(Slice(v.pull(4), 1, 5)); }),
      AllOf(HasSubstr("Slice"), HasSubstr("columns [1, 5) out of range"), HasSubstr("shapes [4]")));
  absl::StatusOr<Function> f = Define("split", [](Vertex& v) {
    auto [a, b] = Split<2>(v.pull(6));
    v.push(Concat({b, Slice(a, 1, 3)}));
  });
  ASSERT_TRUE(f.ok()) << f.status();
  std::vector<std::pair<int64_t, int64_t>> columns;
  for (const Node& n : f->forward().nodes) {
    if (n.kind == OpKind::kSlice) columns.push_back({n.begin, n.end});
  }
  // Split's parts resolve to columns [0, 3) and [3, 6); the user's slice keeps its own.
  EXPECT_THAT(columns, ::testing::UnorderedElementsAre(std::pair<int64_t, int64_t>{0, 3},
                                                       std::pair<int64_t, int64_t>{3, 6},
                                                       std::pair<int64_t, int64_t>{1, 3}));
  EXPECT_EQ(f->forward().nodes[f->pushes()[0]].width, 5);
}

TEST(BuilderTest, DropoutRejectsNonFiniteProbability) {
  for (float p : {std::nanf(""), INFINITY, -INFINITY}) {
    EXPECT_THAT(DefineError("dropout", [p](Vertex& v) { v.push(Dropout(v.pull(3), p)); }),
                AllOf(HasSubstr("vertex function 'dropout'"), HasSubstr("Dropout"),
                      HasSubstr("drop probability")));
  }
}

// An embedding table has only a row-sparse gradient; as a dense weight it used to fail in
// training with an engine error naming nothing.
TEST(BuilderTest, EmbeddingTableUsedAsDenseWeightIsRejected) {
  const auto both = AllOf(HasSubstr("vertex function 'table'"), HasSubstr("parameter 'E'"),
                          HasSubstr("embedding table"), HasSubstr("MatMul"));
  EXPECT_THAT(DefineError("table",
                          [](Vertex& v) {
                            Expr x = v.embed("E", 4, 4);
                            v.push(Tanh(MatMul(x, v.param("E", {4, 4}))));
                          }),
              both);
  EXPECT_THAT(DefineError("table",
                          [](Vertex& v) {
                            Expr h = Tanh(MatMul(v.pull(4), v.param("E", {4, 4})));
                            v.push(h + v.embed("E", 4, 4));
                          }),
              both);
  // Two lookups in one table are fine.
  EXPECT_TRUE(
      Define("lookups", [](Vertex& v) { v.push(v.embed("E", 4, 4) * v.embed("E", 4, 4)); }).ok());
}

TEST(BuilderTest, ConcatOfNothingIsAnError) {
  const auto concat = HasSubstr("Concat: needs at least one operand");
  EXPECT_THAT(DefineError("unused",
                          [](Vertex& v) {
                            Expr e = Concat({});
                            (void)e;
                            v.push(v.pull(3));
                          }),
              AllOf(HasSubstr("vertex function 'unused'"), concat));
  EXPECT_THAT(DefineError("pushed", [](Vertex& v) { v.push(Tanh(Concat({}))); }), concat);
  EXPECT_THAT(DefineError("scattered", [](Vertex& v) { v.scatter({{"h", Concat({})}}); }), concat);
}

TEST(BuilderTest, EmptyExprIsNamed) {
  EXPECT_THAT(DefineError("empty", [](Vertex& v) { v.push(Expr()); }),
              AllOf(HasSubstr("vertex function 'empty'"), HasSubstr("push: an empty Expr")));
  EXPECT_THAT(DefineError("empty_op", [](Vertex& v) { v.push(Sigmoid(Expr())); }),
              HasSubstr("Sigmoid: an empty Expr"));
}

}  // namespace
}  // namespace cavs::vertex
