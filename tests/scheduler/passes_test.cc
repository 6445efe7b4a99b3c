// Each of the engine's optimization passes (scheduler/passes/passes.h) on its own: it changes the
// compiled schedule (or the recorded batch) as it says, and the engine with it and without it
// gives the reference executor's forward values, loss and gradients on trees, chains and DAGs.
#include "scheduler/passes/passes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/parameter.h"
#include "core/random.h"
#include "ops/cpu/cpu_packed_gemm.h"
#include "ops/kernels.h"
#include "scheduler/engine.h"
#include "scheduler/engine_compile.h"
#include "scheduler/reference_executor.h"
#include "tests/scheduler/engine_test_util.h"
#include "tests/scheduler/random_graphs.h"
#include "tests/scheduler/test_functions.h"
#include "vertex/models.h"

namespace cavs::scheduler {
namespace {

using testing::Cell;
using testing::Chains;
using testing::DenseGrad;
using testing::kTolerance;
using testing::RandomDag;
using testing::RelErr;
using testing::Trees;

struct Case {
  std::string what;
  absl::StatusOr<vertex::Function> f;
  std::vector<Graph> graphs;
};

// Trees (Binary Tree-LSTM: folded gate sums, pushes), Tree-FC (a Concat of the children), an
// LSTM on chains, and every op on DAGs (shared children: gathers, not pushes).
std::vector<Case> Cases() {
  core::Rng rng(21);
  std::vector<Case> cases;
  cases.push_back({"binary Tree-LSTM", vertex::models::BinaryTreeLstm(Cell()), Trees(rng, 12, 10)});
  cases.push_back({"Tree-FC", vertex::models::TreeFc(Cell()), Trees(rng, 12, 10)});
  cases.push_back({"LSTM", vertex::models::Lstm(Cell()), Chains(rng, 8, 12)});
  std::vector<Graph> dags;
  for (int i = 0; i < 10; ++i) {
    Graph g =
        RandomDag(rng, 1 + static_cast<int>(rng.UniformInt(20)), 4, {.vocab = 50, .classes = 5});
    g.feature_dim = 3;
    for (int j = 0; j < 3 * g.num_vertices(); ++j) g.features.push_back(rng.Uniform() - 0.5f);
    dags.push_back(std::move(g));
  }
  cases.push_back({"every op on DAGs", testing::EveryOp(5), std::move(dags)});
  return cases;
}

// A training step of `cs` with `passes` against the reference: outputs, loss and every gradient.
void ExpectMatchesReference(const Case& cs, const EngineOptions::Passes& passes,
                            const std::string& what) {
  SCOPED_TRACE(cs.what + ", " + what);
  ASSERT_TRUE(cs.f.ok()) << cs.f.status();
  core::ParameterStore store(7, core::Device::Cpu());
  EngineOptions eo;
  eo.poison_buffers = true;
  eo.passes = passes;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(&*cs.f, &store, eo);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE(store.ZeroGrad().ok());
  RunOptions ro;
  ro.keep_outputs = true;
  ro.dropout_seed = 3;
  absl::StatusOr<RunResult> got = (*engine)->Run(cs.graphs, ro);
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<ReferenceResult> want =
      RunReference(*cs.f, cs.graphs, SnapshotParameters(*cs.f, store), ro);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_NEAR(got->loss_sum, want->run.loss_sum, kTolerance * std::max(1.0, want->run.loss_sum));
  ASSERT_EQ(got->outputs.size(), want->run.outputs.size());
  for (size_t g = 0; g < got->outputs.size(); ++g) {
    EXPECT_LT(RelErr(got->outputs[g], want->run.outputs[g]), kTolerance) << "graph " << g;
  }
  for (const vertex::ParamInfo& p : cs.f->params()) {
    EXPECT_LT(RelErr(DenseGrad(*store.Find(p.name)), want->grads.at(p.name)), kTolerance)
        << "gradient of " << p.name;
  }
}

// One pass: what it changes in the schedule of `f` (true where it acted) and its switch.
struct Pass {
  const char* name;
  std::function<bool(const vertex::Function&, const internal::Compiled&)> acted;
  bool EngineOptions::Passes::*on;  // its switch (internal::CompileOptions too)
};

std::vector<Pass> Passes() {
  auto any_step = [](const internal::ProgramSchedule& s, auto pred) {
    for (const auto& steps : s.steps) {
      for (const internal::Step& st : steps) {
        if (pred(st)) return true;
      }
    }
    return false;
  };
  return {
      {"alias_concats",
       [](const vertex::Function& f, const internal::Compiled& c) {
         for (size_t id = 0; id < f.forward().nodes.size(); ++id) {
           if (f.forward().nodes[id].kind == vertex::OpKind::kConcat && c.fwd.no_op[id]) {
             return true;
           }
         }
         return false;
       },
       &EngineOptions::Passes::alias_concats},
      {"fold_gemm_sums",
       [](const vertex::Function&, const internal::Compiled& c) { return c.fwd.num_sums > 0; },
       &EngineOptions::Passes::fold_gemm_sums},
      {"scratch_rows",
       [](const vertex::Function&, const internal::Compiled& c) {
         return std::any_of(c.fwd.scratch_col.begin(), c.fwd.scratch_col.end(),
                            [](int64_t x) { return x >= 0; });
       },
       &EngineOptions::Passes::scratch_rows},
      {"early_weight_grads",
       [](const vertex::Function&, const internal::Compiled& c) {
         return !c.bwd.early_weight_grads.empty();
       },
       &EngineOptions::Passes::early_weight_grads},
      {"push_pull",
       [any_step](const vertex::Function&, const internal::Compiled& c) {
         return c.pushed_rows >= 0 &&
                any_step(c.fwd, [](const internal::Step& s) { return !s.pushes.empty(); }) &&
                any_step(c.bwd, [](const internal::Step& s) { return !s.pulls.empty(); });
       },
       &EngineOptions::Passes::push_pull},
  };
}

TEST(PassesTest, EachPassActsOnTheTreeLstmAndOnlyWhenOn) {
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  absl::StatusOr<vertex::Function> concat = vertex::models::TreeFc(Cell());
  ASSERT_TRUE(concat.ok());
  for (const Pass& pass : Passes()) {
    SCOPED_TRACE(pass.name);
    // Tree-FC's [h_l, h_r] is the Concat; the Tree-LSTM has the rest.
    const vertex::Function& of = std::string(pass.name) == "alias_concats" ? *concat : *f;
    internal::CompileOptions on{.scratch_rows = true};
    internal::CompileOptions off = on;
    off.*pass.on = false;
    EXPECT_TRUE(pass.acted(of, internal::Compile(of, on)));
    EXPECT_FALSE(pass.acted(of, internal::Compile(of, off)));
  }
}

TEST(PassesTest, WithoutEachPassTheEngineStillMatchesTheReference) {
  for (const Case& cs : Cases()) {
    ExpectMatchesReference(cs, {}, "every pass");
    for (const Pass& pass : Passes()) {
      EngineOptions::Passes off;
      off.*pass.on = false;
      ExpectMatchesReference(cs, off, std::string("without ") + pass.name);
    }
    ExpectMatchesReference(cs,
                           {.alias_concats = false,
                            .fold_gemm_sums = false,
                            .scratch_rows = false,
                            .early_weight_grads = false,
                            .push_pull = false},
                           "no pass");
  }
}

// folded_projections: inference gathering E op(W) (+ bias) by token instead of multiplying the
// embedded rows, against the plain run and the reference, on trees and chains.
TEST(PassesTest, FoldedProjectionsMatchTheReference) {
  core::Rng rng(22);
  std::vector<Case> cases;
  cases.push_back({"binary Tree-LSTM", vertex::models::BinaryTreeLstm(Cell()), Trees(rng, 12, 10)});
  cases.push_back({"LSTM", vertex::models::Lstm(Cell()), Chains(rng, 8, 12)});
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.what);
    ASSERT_TRUE(cs.f.ok()) << cs.f.status();
    const internal::Compiled c = internal::Compile(*cs.f);
    EXPECT_GT(std::count(c.fold_unread.begin(), c.fold_unread.end(), 1), 0)
        << "no embedding left ungathered";
    core::ParameterStore store(7, core::Device::Cpu());
    EngineOptions eo;
    eo.poison_buffers = true;
    auto engine = Engine::Create(&*cs.f, &store, eo);
    ASSERT_TRUE(engine.ok()) << engine.status();
    ASSERT_GT((*engine)->foldable_projections(), 0);
    ASSERT_TRUE((*engine)->FoldInputProjections().ok());
    RunOptions ro;
    ro.training = false;
    ro.backward = false;
    ro.keep_outputs = true;
    absl::StatusOr<ReferenceResult> want =
        RunReference(*cs.f, cs.graphs, SnapshotParameters(*cs.f, store), ro);
    ASSERT_TRUE(want.ok()) << want.status();
    for (bool folded : {false, true}) {
      ro.folded_projections = folded;
      absl::StatusOr<RunResult> got = (*engine)->Run(cs.graphs, ro);
      ASSERT_TRUE(got.ok()) << got.status();
      for (size_t g = 0; g < got->outputs.size(); ++g) {
        EXPECT_LT(RelErr(got->outputs[g], want->run.outputs[g]), kTolerance)
            << (folded ? "folded" : "plain") << ", graph " << g;
      }
    }
  }
}

// packed_weights: the device's packed GEMM (KernelOptions::cpu.packed_gemm, the CPU with
// AVX-512F) packs each weight once per batch; with it and without it a training step gives the
// reference's values and gradients.
TEST(PassesTest, PackedWeightsMatchTheReference) {
  const ops::KernelOptions before = ops::GetKernelOptions();
  for (bool packed : {true, false}) {
    ops::KernelOptions k = before;
    k.cpu.packed_gemm = packed;
    ASSERT_TRUE(ops::SetKernelOptions(k).ok());
    for (const Case& cs : Cases()) ExpectMatchesReference(cs, {}, packed ? "packed" : "unpacked");
    // Whether it acted: a batch large enough for the packed GEMM packs its weights.
    absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
    ASSERT_TRUE(f.ok());
    core::ParameterStore store(7, core::Device::Cpu());
    auto engine = Engine::Create(&*f, &store);
    ASSERT_TRUE(engine.ok());
    core::Rng rng(23);
    ASSERT_TRUE((*engine)->Run(Trees(rng, 64, 20), RunOptions{}).ok());
    if (!packed) {
      EXPECT_EQ((*engine)->stats().pack_bytes, 0);
    } else if (ops::cpu::PackedGemmFast()) {
      EXPECT_GT((*engine)->stats().pack_bytes, 0);
    } else if (ops::cpu::PackedGemmBytes(8, 8) > 0) {
      // AVX2: taken only for batch invariance, not for speed.
      EXPECT_EQ((*engine)->stats().pack_bytes, 0);
      RunOptions invariant;
      invariant.batch_invariant = true;
      ASSERT_TRUE((*engine)->Run(Trees(rng, 64, 20), invariant).ok());
      EXPECT_GT((*engine)->stats().pack_bytes, 0);
    }
  }
  ASSERT_TRUE(ops::SetKernelOptions(before).ok());
}

}  // namespace
}  // namespace cavs::scheduler
