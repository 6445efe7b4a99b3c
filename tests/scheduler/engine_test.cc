// The batched engine against the serial reference executor: forward outputs, loss and every
// gradient on random trees, chains and DAGs, for every policy and batch sizes 1 to 512.
#include "scheduler/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/allocator.h"
#include "core/optimizer.h"
#include "core/random.h"
#include "core/status.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/cpu_packed_gemm.h"
#include "scheduler/engine_compile.h"
#include "scheduler/reference_executor.h"
#include "tests/scheduler/engine_test_util.h"
#include "tests/scheduler/random_graphs.h"
#include "tests/scheduler/serial_policy.h"
#include "tests/scheduler/test_functions.h"
#include "vertex/models.h"

namespace cavs::scheduler {
namespace {

using testing::Cell;
using testing::Chains;
using testing::DenseGrad;
using testing::kTolerance;
using testing::RandomChain;
using testing::RandomDag;
using testing::RandomTree;
using testing::RelErr;
using testing::Trees;

// Two float32 evaluations' predictions (argmax of `logits`: [V, width], one evaluation's
// outputs) agree wherever they are decided. Where the outputs differ by at most `err`, a vertex
// whose top two logits are within 2 err of each other may go either way; no other may differ.
::testing::AssertionResult SamePredictionsOffTies(const std::vector<int32_t>& got,
                                                  const std::vector<int32_t>& want,
                                                  const std::vector<float>& logits, double err) {
  if (got.size() != want.size() || want.empty() || logits.size() % want.size() != 0) {
    return ::testing::AssertionFailure()
           << "sizes " << got.size() << ", " << want.size() << ", " << logits.size();
  }
  const size_t width = logits.size() / want.size();
  for (size_t v = 0; v < want.size(); ++v) {
    if (got[v] == want[v]) continue;
    std::vector<float> row(logits.begin() + v * width, logits.begin() + (v + 1) * width);
    std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
    if (width < 2 || row[0] - row[1] > 2 * err) {
      return ::testing::AssertionFailure()
             << "vertex " << v << " predicted " << got[v] << " instead of " << want[v]
             << ", top two logits " << row[0] << " and " << row[1];
    }
  }
  return ::testing::AssertionSuccess();
}

// The CPU, and the first CUDA device where one is present: every comparison runs on each.
std::vector<core::Device> Devices() {
  std::vector<core::Device> out = {core::Device::Cpu()};
  if (core::DeviceAvailable(core::DeviceType::kCuda) &&
      ops::GetKernels(core::Device::Cuda(0)).ok()) {
    out.push_back(core::Device::Cuda(0));
  }
  return out;
}

void ExpectMatchesReferenceOn(core::Device device, const vertex::Function& f,
                              const std::vector<Graph>& graphs, const PlanOptions& plan,
                              const RunOptions& options, const std::string& what);

void ExpectMatchesReference(const vertex::Function& f, const std::vector<Graph>& graphs,
                            const PlanOptions& plan, const RunOptions& options,
                            const std::string& what) {
  for (core::Device d : Devices()) ExpectMatchesReferenceOn(d, f, graphs, plan, options, what);
}

void ExpectMatchesReferenceOn(core::Device device, const vertex::Function& f,
                              const std::vector<Graph>& graphs, const PlanOptions& plan,
                              const RunOptions& options, const std::string& what) {
  SCOPED_TRACE(what + " on " + device.DebugString());
  core::ParameterStore store(7, device);
  EngineOptions eo;
  eo.device = device;
  eo.plan = plan;
  eo.poison_buffers = true;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(&f, &store, eo);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE(store.ZeroGrad().ok());
  core::CpuAllocator::Global()->ResetPeak();
  const int64_t before = core::CpuAllocator::Global()->stats().bytes_in_use;
  absl::StatusOr<RunResult> got = (*engine)->Run(graphs, options);
  ASSERT_TRUE(got.ok()) << got.status();
  const int64_t peak = core::CpuAllocator::Global()->stats().peak_bytes_in_use - before;
  const EngineStats& st = (*engine)->stats();
  if (device.is_cpu()) {
    EXPECT_LE(peak, 2 * (st.arena_bytes + st.upload_region_bytes + st.pack_bytes) + 65536)
        << "memory beyond the plan";
  }
  absl::StatusOr<ReferenceResult> want =
      RunReference(f, graphs, SnapshotParameters(f, store), options);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(got->labelled, want->run.labelled);
  EXPECT_NEAR(got->loss_sum, want->run.loss_sum, kTolerance * std::max(1.0, want->run.loss_sum));
  ASSERT_EQ(got->outputs.size(), want->run.outputs.size());
  for (size_t g = 0; g < got->outputs.size(); ++g) {
    std::vector<double> ref(want->run.outputs[g].begin(), want->run.outputs[g].end());
    EXPECT_LT(RelErr(got->outputs[g], ref), kTolerance) << "outputs of graph " << g;
  }
  if (!options.backward) return;
  for (const vertex::ParamInfo& p : f.params()) {
    EXPECT_LT(RelErr(DenseGrad(*store.Find(p.name)), want->grads.at(p.name)), kTolerance)
        << "gradient of " << p.name;
  }
}

RunOptions Options() {
  RunOptions o;
  o.keep_outputs = true;
  o.dropout_seed = 3;
  return o;
}

TEST(EngineTest, TreeCellsEveryPolicyAndBatchSize) {
  const vertex::models::CellConfig c = Cell();
  core::Rng rng(1);
  for (auto f : {vertex::models::BinaryTreeLstm(c), vertex::models::TreeFc(c),
                 vertex::models::TreeGru(c), vertex::models::ChildSumTreeLstm(c, 2)}) {
    ASSERT_TRUE(f.ok()) << f.status();
    for (int batch : {1, 7, 64}) {
      const std::vector<Graph> gs = Trees(rng, batch, 12);
      for (Policy policy : {Policy::kHeight, Policy::kDepth, Policy::kAgenda}) {
        PlanOptions po{policy, policy == Policy::kAgenda ? 5 : 0};
        ExpectMatchesReference(*f, gs, po, Options(),
                               f->name() + " batch " + std::to_string(batch) + " policy " +
                                   std::to_string(static_cast<int>(policy)));
      }
    }
  }
}

TEST(EngineTest, Batch512AndSingleVertexGraphs) {
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  core::Rng rng(2);
  std::vector<Graph> gs = Trees(rng, 512, 20);
  for (int i = 0; i < 20; ++i) gs[i * 7] = RandomTree(rng, 1, {.vocab = 50, .classes = 5});
  ExpectMatchesReference(*f, gs, {}, Options(), "512 trees");
  RunOptions inference = Options();
  inference.backward = false;
  ExpectMatchesReference(*f, gs, {}, inference, "512 trees, inference");
  // The same with OpenBLAS for every GEMM (the path of CPUs without the packed GEMM).
  ops::cpu::SetPackedGemmEnabled(false);
  ExpectMatchesReference(*f, gs, {}, Options(), "512 trees, no packed GEMM");
  ops::cpu::SetPackedGemmEnabled(true);
}

// Graphs with no vertices among the others, a batch of nothing but those, graphs without
// tokens or labels at all, and a batch with no label anywhere: the results of the others,
// empty predictions for the empty graphs, zero loss and gradients where nothing is labelled.
TEST(EngineTest, EmptyGraphsAndUnlabelledBatches) {
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  core::Rng rng(8);
  std::vector<Graph> gs = Trees(rng, 9, 8);
  gs[0] = Graph();
  gs[4] = Graph();
  gs[8] = Graph();
  gs[2].tokens.clear();
  gs[5].labels.clear();
  ExpectMatchesReference(*f, gs, {}, Options(), "empty graphs among trees");
  ExpectMatchesReference(*f, {Graph(), Graph()}, {}, Options(), "only empty graphs");
  for (Graph& g : gs) g.labels.clear();
  ExpectMatchesReference(*f, gs, {}, Options(), "nothing labelled");
  core::ParameterStore store(7);
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(&*f, &store);
  ASSERT_TRUE(engine.ok());
  absl::StatusOr<RunResult> r = (*engine)->Run({Graph(), gs[1], Graph()}, Options());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->predictions.size(), 3u);
  EXPECT_TRUE(r->predictions[0].empty());
  EXPECT_EQ(r->predictions[1].size(), static_cast<size_t>(gs[1].num_vertices()));
  EXPECT_TRUE(r->predictions[2].empty());
  EXPECT_EQ(r->loss_sum, 0.0);
  EXPECT_EQ(r->labelled, 0);
}

TEST(EngineTest, SequenceCellsOnChains) {
  const vertex::models::CellConfig c = Cell();
  core::Rng rng(3);
  std::vector<Graph> gs = {RandomChain(rng, 1000, {.vocab = 50, .classes = 5})};
  for (Graph& g : Chains(rng, 30, 40)) gs.push_back(std::move(g));
  for (auto f : {vertex::models::Lstm(c), vertex::models::Gru(c)}) {
    ASSERT_TRUE(f.ok());
    for (Policy policy : {Policy::kHeight, Policy::kDepth, Policy::kAgenda}) {
      ExpectMatchesReference(*f, gs, {policy, 16}, Options(), f->name());
    }
  }
}

// Cells wide enough that a round's GEMM of 64 rows is more than one wave of the small GEMM's
// 16 x 32 tiles on an H100 (4 gates x 300 columns: 152 blocks), with the backward's to h
// 64 x 300 x 1200, B transposed: on a GPU, cuBLAS's shapes unless the small GEMM is everywhere
// (CAVS_SMALL_GEMM=1 in scripts/gpu_run.sh).
TEST(EngineTest, WideSequenceCellsOnChains) {
  core::Rng rng(9);
  const std::vector<Graph> gs = Chains(rng, 64, 12);
  absl::StatusOr<vertex::Function> f =
      vertex::models::Lstm({.vocab = 50, .embed = 16, .hidden = 300, .classes = 5});
  ASSERT_TRUE(f.ok()) << f.status();
  ExpectMatchesReference(*f, gs, {Policy::kHeight, 0}, Options(), "LSTM, hidden 300");
}

// Every op, DAGs with shared children and wide fan-in, reductions, dropout, features.
TEST(EngineTest, EveryOpOnDags) {
  absl::StatusOr<vertex::Function> f = testing::EveryOp(5);
  ASSERT_TRUE(f.ok()) << f.status();
  core::Rng rng(4);
  std::vector<Graph> gs;
  for (int i = 0; i < 40; ++i) {
    Graph g =
        RandomDag(rng, 1 + static_cast<int>(rng.UniformInt(30)), 6, {.vocab = 50, .classes = 5});
    g.feature_dim = 3;
    for (int j = 0; j < 3 * g.num_vertices(); ++j) g.features.push_back(rng.Uniform() - 0.5f);
    gs.push_back(std::move(g));
  }
  // Wide fan-in: a vertex with 300 children (reductions take any arity), one child shared.
  Graph star;
  std::vector<int32_t> kids;
  for (int i = 0; i < 300; ++i) kids.push_back(star.AddVertex({}, i % 50, i % 5));
  kids.push_back(kids[7]);
  star.AddVertex(kids, 3, 1);
  star.feature_dim = 3;
  star.features.assign(3 * star.num_vertices(), 0.25f);
  gs.push_back(std::move(star));
  for (Policy policy : {Policy::kHeight, Policy::kDepth, Policy::kAgenda}) {
    ExpectMatchesReference(*f, gs, {policy, 9}, Options(), "every op");
  }
  RunOptions sum = Options();
  sum.loss = RunOptions::Loss::kSum;
  sum.training = false;
  ExpectMatchesReference(*f, gs, {}, sum, "every op, summed loss, eval");
}

// A batching policy of the caller's (PlanOptions::custom; one vertex a round) through the
// engine, on every device: the reference's results, as every built-in policy gives.
TEST(EngineTest, ACallersBatchingPolicy) {
  PlanOptions serial;
  serial.custom = std::make_shared<testing::SerialPolicy>();
  core::Rng rng(8);
  absl::StatusOr<vertex::Function> tree = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(tree.ok()) << tree.status();
  ExpectMatchesReference(*tree, Trees(rng, 6, 7), serial, Options(), "binary trees, serial");
  absl::StatusOr<vertex::Function> every = testing::EveryOp(5);
  ASSERT_TRUE(every.ok()) << every.status();
  std::vector<Graph> dags;
  for (int i = 0; i < 6; ++i) {
    Graph g = RandomDag(rng, 2 + i * 3, 4, {.vocab = 50, .classes = 5});
    g.feature_dim = 3;
    for (int j = 0; j < 3 * g.num_vertices(); ++j) g.features.push_back(rng.Uniform() - 0.5f);
    dags.push_back(std::move(g));
  }
  ExpectMatchesReference(*every, dags, serial, Options(), "every op on DAGs, serial");
}

TEST(EngineTest, FoldedGemmSumsOnTreesAndDags) {
  absl::StatusOr<vertex::Function> f = testing::GemmSums(5);
  ASSERT_TRUE(f.ok()) << f.status();
  core::Rng rng(8);
  std::vector<Graph> gs = Trees(rng, 30, 15);
  for (int i = 0; i < 20; ++i) {
    gs.push_back(
        RandomDag(rng, 1 + static_cast<int>(rng.UniformInt(25)), 2, {.vocab = 50, .classes = 5}));
  }
  // Tokens on some internal vertices too: the terms' rows overlap in part, so a call has rows
  // to accumulate, rows to start and (with the agenda's small rounds) rows to fill.
  for (int i = 0; i < 15; ++i) {
    gs.push_back(
        RandomTree(rng, 1 + static_cast<int>(rng.UniformInt(12)),
                   {.vocab = 50, .classes = 5, .token_prob = 0.6, .internal_tokens = true}));
  }
  RunOptions infer = Options();
  infer.backward = false;
  for (bool packed : {true, false}) {
    ops::cpu::SetPackedGemmEnabled(packed);
    const std::string what = packed ? "gemm sums" : "gemm sums, no packed GEMM";
    for (Policy policy : {Policy::kHeight, Policy::kDepth, Policy::kAgenda}) {
      ExpectMatchesReference(*f, gs, {policy, 9}, Options(), what);
    }
    ExpectMatchesReference(*f, gs, {}, infer, what + ", inference");
    // A batch too small to pack for: the same path as a device without a packed GEMM.
    ExpectMatchesReference(*f, {gs[0], gs[40]}, {}, Options(), what + ", two graphs");
  }
  ops::cpu::SetPackedGemmEnabled(true);
}

// x W + [h_l, h_r] U + b of a Tree-LSTM is computed in place by its two GEMMs (and the logits'
// h out_W + out_b by one): the round's fused kernel has no 5H-wide add left.
// RunOptions::batch_invariant: a tree's logits are the same bits alone and in a batch of 60
// (serving batches whatever arrives; cavs-train evaluates 200 at a time). Sizes where
// OpenBLAS's small-matrix path, which the engine takes below 128 rows without the option,
// rounds differently from its large one (the output layer's k = 48, n = 5).
TEST(EngineTest, BatchInvariantRunsGiveASampleTheSameBitsInAnyBatch) {
  if (ops::cpu::PackedGemmBytes(48, 5) == 0) GTEST_SKIP() << "no packed GEMM (AVX-512F) here";
  core::Rng rng(5);
  const std::vector<Graph> trees = Trees(rng, 60, 20);
  absl::StatusOr<vertex::Function> f =
      vertex::models::BinaryTreeLstm({.vocab = 50, .embed = 40, .hidden = 48, .classes = 5});
  ASSERT_TRUE(f.ok()) << f.status();
  core::ParameterStore store(3, core::Device::Cpu());
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(&*f, &store);
  ASSERT_TRUE(engine.ok()) << engine.status();
  for (bool folded : {false, true}) {
    SCOPED_TRACE(folded ? "folded" : "plain");
    if (folded) ASSERT_TRUE((*engine)->FoldInputProjections().ok());
    RunOptions ro;
    ro.training = false;
    ro.backward = false;
    ro.keep_outputs = true;
    ro.folded_projections = folded;
    ro.batch_invariant = true;
    absl::StatusOr<RunResult> all = (*engine)->Run(trees, ro);
    ASSERT_TRUE(all.ok()) << all.status();
    for (size_t i = 0; i < trees.size(); i += 7) {
      absl::StatusOr<RunResult> one = (*engine)->Run({trees[i]}, ro);
      ASSERT_TRUE(one.ok()) << one.status();
      EXPECT_EQ(one->outputs[0], all->outputs[i]) << "tree " << i;
    }
  }
}

TEST(EngineTest, TreeLstmGateSumIsFolded) {
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  const internal::Compiled c = internal::Compile(*f);
  const vertex::Program& p = f->forward();
  int terms = 0, with_bias = 0, last = 0;
  for (size_t id = 0; id < p.nodes.size(); ++id) {
    if (p.nodes[id].kind != vertex::OpKind::kMatMul) continue;
    terms += c.fwd.gemm[id].sum >= 0 ? 1 : 0;
    with_bias += c.fwd.gemm[id].bias >= 0 ? 1 : 0;
    last += c.fwd.gemm[id].last ? 1 : 0;
  }
  EXPECT_EQ(c.fwd.num_sums, 2);  // x W + h U + b, and h out_W + out_b
  EXPECT_EQ(terms, 3);
  EXPECT_EQ(with_bias, 3);
  EXPECT_EQ(last, 2);  // h U and h out_W
  for (int cls = 0; cls < 5; ++cls) {
    for (const internal::Step& st : c.fwd.steps[cls]) {
      if (!st.fused) continue;
      for (int id : st.nodes) {
        EXPECT_FALSE(p.nodes[id].kind == vertex::OpKind::kAdd &&
                     p.nodes[id].width == 5 * Cell().hidden)
            << "a gate-wide add is left in a fused step";
      }
    }
  }
}

// Where the device's fused kernel keeps temporaries in a scratch row, the Tree-LSTM's products
// and partial sums that live and die within a round's fused step get no buffer: 4 forward
// (i u, f_l c_l, f_r c_r, their partial sum) and 9 backward; none without scratch support.
TEST(EngineTest, TreeLstmTemporariesLiveInScratch) {
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  auto count = [](const internal::ProgramSchedule& s) {
    return std::count_if(s.scratch_col.begin(), s.scratch_col.end(),
                         [](int64_t c) { return c >= 0; });
  };
  const internal::Compiled with = internal::Compile(*f, {.scratch_rows = true});
  EXPECT_EQ(count(with.fwd), 4);
  EXPECT_EQ(count(with.bwd), 9);
  const internal::Compiled without = internal::Compile(*f, {.scratch_rows = false});
  EXPECT_EQ(count(without.fwd), 0);
  EXPECT_EQ(count(without.bwd), 0);
  int unused = 0;
  for (const internal::Buffer& b : with.buffers) unused += b.unused ? 1 : 0;
  // The 13, and the 3 buffers of the pushed Gathers ([h_l, h_r], c_l, c_r), which became column
  // ranges of one (MergePushedRows).
  EXPECT_EQ(unused, 13 + 3);
  ASSERT_GE(with.pushed_rows, 0);
  EXPECT_EQ(with.buffers[with.pushed_rows].width, 4 * Cell().hidden);
}

// A one-input Concat emits one instruction but writes a column range of its own buffer: it must
// not become a scratch temporary (it did, and the CPU engine then wrote through a null buffer).
TEST(EngineTest, SingleInputConcatsKeepTheirBuffers) {
  absl::StatusOr<vertex::Function> f = testing::SingleInputConcats(5);
  ASSERT_TRUE(f.ok()) << f.status();
  core::Rng rng(12);
  std::vector<Graph> gs = Chains(rng, 40, 12);
  for (Graph& g : gs) {
    g.feature_dim = 3;
    for (int j = 0; j < 3 * g.num_vertices(); ++j) g.features.push_back(rng.Uniform() - 0.5f);
  }
  for (Policy policy : {Policy::kHeight, Policy::kDepth}) {
    ExpectMatchesReference(*f, gs, {policy, 0}, Options(), "single-input concats");
  }
}

TEST(EngineTest, BadBatchIsAnError) {
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  core::ParameterStore store(1);
  auto engine = Engine::Create(&*f, &store);
  ASSERT_TRUE(engine.ok());
  Graph cyc;
  cyc.AddVertex({1});
  cyc.AddVertex({0});
  absl::StatusOr<RunResult> r = (*engine)->Run({Graph::Chain(2), cyc}, RunOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sample 1"), std::string::npos) << r.status();
  EXPECT_TRUE((*engine)->Run(std::vector<Graph>{}, RunOptions()).ok());  // an empty batch is fine
}

// A table embedded twice (two lookups of one table, used differently): the second lookup's
// gradient rows are summed apart and added onto the first's, against the reference on every
// device and policy; the two runs of a pipelined step agree bit for bit there too
// (SubmitAndFinishPipelinedMatchRun covers one lookup).
TEST(EngineTest, ATableEmbeddedTwice) {
  absl::StatusOr<vertex::Function> f = vertex::Define("embed_twice", [](vertex::Vertex& v) {
    using vertex::Expr;
    Expr a = v.embed("emb", 50, 4);
    Expr b = vertex::Dropout(v.embed("emb", 50, 4), 0.25f, 7);
    vertex::State l = v.gather(0), r = v.gather(1);
    Expr h = vertex::Tanh(
        vertex::MatMul(vertex::Concat({a * b, l["h"] + r["h"]}), v.param("W", {8, 4})) + a);
    v.scatter({{"h", h}});
    v.push(vertex::MatMul(h, v.param("out", {4, 5})));
  });
  ASSERT_TRUE(f.ok()) << f.status();
  core::Rng rng(37);
  const std::vector<Graph> gs = Trees(rng, 12, 10);
  for (Policy policy : {Policy::kHeight, Policy::kDepth, Policy::kAgenda}) {
    ExpectMatchesReference(*f, gs, {policy, 7}, Options(), "a table embedded twice");
  }
}

// Misuse of the API is an error naming what is wrong, never a read out of bounds: no function
// or store; a parameter the caller replaced in the store after Create (another shape, no
// gradient); a plan made for other graphs; backward through a function with no loss. The
// engine keeps its own copy of the function, so one made in a helper may be gone.
TEST(EngineTest, MisuseIsAnErrorNamingWhatIsWrong) {
  core::ParameterStore store(1);
  EXPECT_EQ(Engine::Create(nullptr, &store).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(Engine::Create(&*f, nullptr).status().code(), absl::StatusCode::kInvalidArgument);

  core::Rng rng(31);
  const std::vector<Graph> graphs = Trees(rng, 3, 9);
  auto make = [&]() {  // the Function is destroyed when this returns
    absl::StatusOr<vertex::Function> local = vertex::models::BinaryTreeLstm(Cell());
    EXPECT_TRUE(local.ok());
    return Engine::Create(&*local, &store);
  };
  absl::StatusOr<std::unique_ptr<Engine>> engine = make();
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<RunResult> first = (*engine)->Run(graphs, RunOptions());
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = Engine::Create(&*f, &store);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(store.ZeroGrad().ok());
  absl::StatusOr<RunResult> second = (*again)->Run(graphs, RunOptions());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->loss_sum, second->loss_sum);

  // A plan of as many graphs, but other ones.
  absl::StatusOr<Plan> other = (*engine)->PlanBatch(Trees(rng, 3, 9));
  ASSERT_TRUE(other.ok());
  absl::StatusOr<RunResult> r = (*engine)->Run(graphs, RunOptions(), *other);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("a plan of other graphs"), std::string::npos) << r.status();

  // U replaced by a tensor of another shape; then restored, with its gradient dropped.
  core::Parameter* u = store.Find("U");
  ASSERT_NE(u, nullptr);
  const core::Tensor value = u->value, grad = u->grad;
  absl::StatusOr<core::Tensor> small = core::Tensor::Zeros(core::Shape({3, 3}));
  ASSERT_TRUE(small.ok());
  u->value = *small;
  for (absl::Status s :
       {(*engine)->Run(graphs, RunOptions()).status(), (*engine)->FoldInputProjections()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("parameter 'U'"), std::string::npos) << s;
    EXPECT_NE(s.message().find("[3, 3]"), std::string::npos) << s;
  }
  u->value = value;
  u->grad = core::Tensor();
  RunOptions infer;
  infer.training = false;
  infer.backward = false;
  EXPECT_TRUE((*engine)->Run(graphs, infer).ok());  // inference needs no gradient
  absl::Status s = (*engine)->Run(graphs, RunOptions()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("parameter 'U'"), std::string::npos) << s;
  u->grad = grad;
  EXPECT_TRUE((*engine)->Run(graphs, RunOptions()).ok());

  // Backward through a function that pushes nothing.
  absl::StatusOr<vertex::Function> silent = vertex::Define("silent", [](vertex::Vertex& v) {
    v.scatter({{"h", vertex::Tanh(v.pull(3))}});
  });
  ASSERT_TRUE(silent.ok()) << silent.status();
  core::ParameterStore store2(1);
  auto quiet = Engine::Create(&*silent, &store2);
  ASSERT_TRUE(quiet.ok());
  Graph one = Graph::Chain(1);  // the function reads no children
  one.feature_dim = 3;
  one.features.assign(3, 0.5f);
  s = (*quiet)->Run({one, one}, RunOptions()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("pushes nothing"), std::string::npos) << s;
  one.labels = {2};  // no loss reads it: nothing counts as labelled, as in the reference
  absl::StatusOr<RunResult> ran = (*quiet)->Run({one, one}, infer);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->labelled, 0);
  one.labels = {-7};
  s = (*quiet)->Run({one}, infer).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("label -7 is negative"), std::string::npos) << s;
}

// The hooks the distributed trainer overlaps communication with: each parameter is reported
// once, when its gradient is final; the output layer's before the backward rounds.
TEST(EngineTest, GradientReadyHooks) {
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  core::ParameterStore store(3);
  auto engine = Engine::Create(&*f, &store);
  ASSERT_TRUE(engine.ok());
  core::Rng rng(5);
  const std::vector<Graph> gs = Trees(rng, 16, 10);
  std::vector<std::string> events;
  std::map<std::string, std::vector<float>> at_hook;
  RunOptions o;
  o.on_gradient_ready = [&](const std::string& name) {
    events.push_back(name);
    at_hook[name] = DenseGrad(*store.Find(name));
    return absl::OkStatus();
  };
  o.on_progress = [&]() {
    events.push_back("progress");
    return absl::OkStatus();
  };
  ASSERT_TRUE(store.ZeroGrad().ok());
  ASSERT_TRUE((*engine)->Run(gs, o).ok());
  ASSERT_EQ(at_hook.size(), f->params().size());
  for (const vertex::ParamInfo& p : f->params()) {
    EXPECT_EQ(std::count(events.begin(), events.end(), p.name), 1) << p.name;
    EXPECT_EQ(at_hook[p.name], DenseGrad(*store.Find(p.name))) << p.name << " changed after";
  }
  const auto last_progress = std::find(events.rbegin(), events.rend(), "progress").base();
  for (const char* early : {"out_W", "out_b"}) {
    EXPECT_LT(std::find(events.begin(), events.end(), early), last_progress) << early;
  }
  for (const char* late : {"U", "W", "embedding"}) {
    EXPECT_GT(std::find(events.begin(), events.end(), late), last_progress) << late;
  }
  // An error from a hook aborts the run.
  o.on_progress = []() { return absl::CancelledError("peer gone"); };
  EXPECT_EQ((*engine)->Run(gs, o).status().code(), absl::StatusCode::kCancelled);
}

// A field whose gradient a Concat's backward splits into Slices: a GEMM reads a Slice before the
// first fused step that reads the gradient itself, so the pull must come before that GEMM (it
// came after, and the chains' gradients were off by 60-85%; a review found it).
absl::StatusOr<vertex::Function> SliceReader(int64_t classes) {
  using namespace vertex;
  return Define("slice_reader", [classes](Vertex& v) {
    Expr x = v.embed("emb", 50, 4);
    Expr hp = v.gather(0)["h"];
    Expr a = MatMul(hp, v.param("A", {6, 3}));
    Expr b = MatMul(x, v.param("B", {4, 3}));
    Expr t = Tanh(MatMul(x, v.param("C", {4, 6})) + MatMul(hp, v.param("D", {6, 6})));
    Expr h = Concat({a, b}) + t;
    v.scatter({{"h", h}});
    v.push(MatMul(t, v.param("out", {6, classes})));
  });
}

TEST(EngineTest, SliceReadersOfAFieldGradientOnChains) {
  absl::StatusOr<vertex::Function> f = SliceReader(5);
  ASSERT_TRUE(f.ok()) << f.status();
  core::Rng rng(21);
  std::vector<Graph> gs = Chains(rng, 10, 8);
  ExpectMatchesReference(*f, gs, {}, Options(), "slice reader, chains");
  // The same chains plus a DAG (shared child): gathers and scatter-adds as before.
  std::vector<Graph> dag = gs;
  Graph g;
  const int32_t leaf = g.AddVertex({}, 3, 1);
  g.AddVertex({leaf}, 4, 2);
  g.AddVertex({leaf}, 5, 3);
  dag.push_back(g);
  ExpectMatchesReference(*f, dag, {}, Options(), "slice reader, with a DAG");
}

// Forests where every vertex has one parent (pushes and pulls), any arity, empty slots.
Graph UniqueForest(core::Rng& rng, int n, int max_children) {
  Graph g;
  std::vector<int32_t> free;
  for (int v = 0; v < n; ++v) {
    std::vector<int32_t> kids;
    const int k = static_cast<int>(rng.UniformInt(max_children + 1));
    for (int i = 0; i < k; ++i) {
      if (free.empty() || rng.Uniform() < 0.15) {
        kids.push_back(-1);
        continue;
      }
      const size_t j = rng.UniformInt(free.size());
      kids.push_back(free[j]);
      free.erase(free.begin() + j);
    }
    while (!kids.empty() && kids.back() < 0) kids.pop_back();
    const int32_t token = rng.Uniform() < 0.7 ? static_cast<int32_t>(rng.UniformInt(50)) : -1;
    const int32_t label = rng.Uniform() < 0.8 ? static_cast<int32_t>(rng.UniformInt(5)) : -1;
    free.push_back(g.AddVertex(kids, token, label));
  }
  return g;
}

absl::StatusOr<vertex::Function> PushPullCorner(int which, int64_t classes) {
  using namespace vertex;
  return Define("extra", [which, classes](Vertex& v) {
    Expr x = v.embed("emb", 50, 4);
    Expr l = v.gather(0)["h"], r = v.gather(1)["h"];
    if (which == 0) {  // producer aliased into a Concat with a gathered value; logits read it
      Expr h =
          Tanh(MatMul(x, v.param("W", {4, 6})) + MatMul(Concat({l, r}), v.param("U", {12, 6})));
      v.scatter({{"h", h}, {"k", h}});
      Expr kk = v.gather(0)["k"];
      v.push(MatMul(Concat({l, h, kk}), v.param("out", {18, classes})));
    } else if (which == 1) {  // residual, not pushed: GatherGrad reads ScatterGrad directly
      Expr t = Tanh(MatMul(x, v.param("W", {4, 6})) + MatMul(r, v.param("U", {6, 6})));
      Expr h = l + t;
      v.scatter({{"h", h}});
      v.push(MatMul(t, v.param("out", {6, classes})));
    } else if (which == 2) {  // a second field whose gradient is another field's
      Expr t = Tanh(MatMul(x, v.param("W", {4, 6})) + MatMul(l, v.param("U", {6, 6})));
      Expr g = v.gather(0)["g"];
      Expr h = t + g;
      Expr gg = Sigmoid(MatMul(r, v.param("V", {6, 6}))) * t;
      v.scatter({{"h", h}, {"g", gg}});
      v.push(MatMul(t, v.param("out", {6, classes})));
    } else {  // scatter grad read through slices by a sink (GatherGrad of r's field)
      Expr t = Tanh(MatMul(x, v.param("W", {4, 6})) + MatMul(l, v.param("U", {6, 6})));
      Expr h = Concat({Slice(r, 0, 3), Slice(t, 0, 3)}) + t;
      v.scatter({{"h", h}});
      v.push(MatMul(t, v.param("out", {6, classes})));
    }
  });
}

// Every cell and the test functions on unique-parent forests, every policy, training and
// inference, against the reference; and four functions for the push/pull corners: a field
// produced into a Concat the logits read, two fields of one producer, a residual field that is
// not pushed, and a field whose gradient feeds another field's.
TEST(EngineTest, UniqueParentForestsEveryCellAndPolicy) {
  const vertex::models::CellConfig c = Cell();
  std::vector<std::pair<std::string, absl::StatusOr<vertex::Function>>> fs;
  fs.push_back({"everyop", testing::EveryOp(5)});
  fs.push_back({"gemmsums", testing::GemmSums(5)});
  fs.push_back({"single", testing::SingleInputConcats(5)});
  fs.push_back({"slice", SliceReader(5)});
  fs.push_back({"btl", vertex::models::BinaryTreeLstm(c)});
  fs.push_back({"cs1", vertex::models::ChildSumTreeLstm(c, 1)});
  fs.push_back({"cs3", vertex::models::ChildSumTreeLstm(c, 3)});
  fs.push_back({"treefc", vertex::models::TreeFc(c)});
  fs.push_back({"treegru", vertex::models::TreeGru(c)});
  fs.push_back({"lstm", vertex::models::Lstm(c)});
  fs.push_back({"gru", vertex::models::Gru(c)});
  for (int w = 0; w < 4; ++w) fs.push_back({"corner" + std::to_string(w), PushPullCorner(w, 5)});
  for (auto& [name, f] : fs) {
    ASSERT_TRUE(f.ok()) << f.status();
    core::Rng rng(31);
    std::vector<Graph> gs;
    const int arity = f->max_arity() < 0 ? 6 : f->max_arity();
    for (int i = 0; i < 25; ++i) {
      Graph g = UniqueForest(rng, 1 + static_cast<int>(rng.UniformInt(20)), arity);
      g.feature_dim = 3;
      for (int j = 0; j < 3 * g.num_vertices(); ++j) g.features.push_back(rng.Uniform() - 0.5f);
      gs.push_back(std::move(g));
    }
    for (Policy policy : {Policy::kHeight, Policy::kDepth, Policy::kAgenda}) {
      for (int cap : {0, 1, 3}) {
        if (policy != Policy::kAgenda && cap > 0) continue;
        ExpectMatchesReference(*f, gs, {policy, cap}, Options(),
                               name + " policy " + std::to_string(static_cast<int>(policy)) +
                                   " cap " + std::to_string(cap));
      }
    }
    RunOptions infer = Options();
    infer.backward = false;
    ExpectMatchesReference(*f, gs, {}, infer, name + " inference");
  }
}

TEST(EngineTest, LaunchesPerRound) {
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  core::ParameterStore store(1);
  auto engine = Engine::Create(&*f, &store);
  ASSERT_TRUE(engine.ok());
  // One GEMM and one fused element-wise kernel forward: the children's h and c reach the
  // parents' gathered rows (straight into the Concat) by pushes in the children's fused
  // kernels, where every vertex has one parent. Backward one fused kernel and one GEMM: the
  // children pull their gradients from the parents' rows instead of a scatter-add launch.
  EXPECT_EQ((*engine)->ForwardLaunchesPerRound(), 2);
  EXPECT_EQ((*engine)->BackwardLaunchesPerRound(), 2);
}

// The rounds record what ForwardLaunchesPerRound and BackwardLaunchesPerRound count: with every
// vertex without children in round 0 (no GEMM there) the rounds after it are one GEMM and one
// fused program each, forward and backward. A tree's internal vertex has no token: its round's
// GEMM starts its gates with the bias of x W + h U + b (Kernels::GemmAddsBias; not a fill of the
// bias and a GEMM onto it, one launch more a round on a device without it). Below 128 rows the
// CPU takes that GEMM, not the packed one.
void ExpectRoundsRecordTheLaunchesCounted(const vertex::Function& f,
                                          const std::vector<Graph>& graphs,
                                          const std::string& what) {
  core::ParameterStore store(1);
  auto engine = Engine::Create(&f, &store);
  ASSERT_TRUE(engine.ok());
  for (bool train : {false, true}) {
    SCOPED_TRACE(what + (train ? ", training" : ", inference"));
    RunOptions o = Options();
    o.backward = train;
    ASSERT_TRUE((*engine)->Run(graphs, o).ok());
    const EngineStats& s = (*engine)->stats();
    ASSERT_LT(s.rows, 128);
    ASSERT_GT(s.rounds, 2);
    EXPECT_EQ(s.forward_round_commands, 1 + (s.rounds - 1) * (*engine)->ForwardLaunchesPerRound());
    EXPECT_EQ(s.backward_round_commands,
              train ? 1 + (s.rounds - 1) * (*engine)->BackwardLaunchesPerRound() : 0);
  }
}

TEST(EngineTest, RoundsRecordTheLaunchesCounted) {
  core::Rng rng(17);
  for (bool chains : {false, true}) {
    // The sequence LSTM's chains: every vertex has a token, so x W + b starts every row in the
    // pre-ops and the rounds' h U accumulates onto it.
    absl::StatusOr<vertex::Function> f =
        chains ? vertex::models::Lstm(Cell()) : vertex::models::BinaryTreeLstm(Cell());
    ASSERT_TRUE(f.ok());
    const std::vector<Graph> graphs = chains ? Chains(rng, 4, 12) : Trees(rng, 4, 12);
    ExpectRoundsRecordTheLaunchesCounted(*f, graphs, chains ? "LSTM chains" : "Tree-LSTM trees");
  }
}

// On a device whose GEMM does not add a bias (here the CPU told to say so), the engine fills the
// bias and runs the GEMM onto it: the results are the same (on NaN-poisoned buffers), and the
// forward rounds record one launch more, as ForwardLaunchesPerRound counts.
TEST(EngineTest, WithoutGemmBiasAFillStartsTheSum) {
  ops::cpu::CpuKernels* cpu = ops::cpu::CpuKernels::Get();
  struct Restore {
    ops::cpu::CpuKernels* k;
    ~Restore() { k->SetGemmAddsBias(true); }
  } restore{cpu};
  cpu->SetGemmAddsBias(false);
  core::Rng rng(19);
  const std::vector<Graph> graphs = Trees(rng, 4, 12);
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  ExpectMatchesReferenceOn(core::Device::Cpu(), *f, graphs, {}, Options(), "without GemmBias");
  core::ParameterStore store(1);
  auto engine = Engine::Create(&*f, &store);
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ((*engine)->ForwardLaunchesPerRound(), 3);
  ExpectRoundsRecordTheLaunchesCounted(*f, graphs, "Tree-LSTM trees without GemmBias");
}

// A new engine's stats after inference over `graphs` with `f`, then after training.
std::pair<EngineStats, EngineStats> InferThenTrain(const vertex::Function& f,
                                                   const std::vector<Graph>& graphs) {
  core::ParameterStore store(5);
  auto engine = Engine::Create(&f, &store);
  CAVS_CHECK(engine.ok(), engine.status().ToString());
  RunOptions infer;
  infer.backward = false;
  CAVS_CHECK((*engine)->Run(graphs, infer).ok());
  const EngineStats after_infer = (*engine)->stats();
  CAVS_CHECK(store.ZeroGrad().ok());
  CAVS_CHECK((*engine)->Run(graphs, RunOptions()).ok());
  return {after_infer, (*engine)->stats()};
}

// A run uploads only the index arrays its launches read. On trees (every child has one parent,
// so children push into their parents' gathered rows) inference reads each slot's parent rows,
// the tokens and the labels; training also reads the rows of each token (the embedding's
// gradient), and with dropout the uids (its mask). The child rows and the token slots are not
// uploaded.
TEST(EngineTest, RunsUploadOnlyTheIndexArraysTheyRead) {
  core::Rng rng(23);
  const std::vector<Graph> graphs = Trees(rng, 6, 12);
  for (float dropout : {0.0f, 0.5f}) {
    vertex::models::CellConfig c = Cell();
    c.dropout = dropout;
    absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(c);
    ASSERT_TRUE(f.ok());
    SCOPED_TRACE(absl::StrCat("dropout ", dropout));
    core::ParameterStore store(5);
    auto engine = Engine::Create(&*f, &store);
    ASSERT_TRUE(engine.ok());
    RunOptions infer;
    infer.training = false;
    infer.backward = false;
    ASSERT_TRUE((*engine)->Run(graphs, infer).ok());
    const EngineStats st = (*engine)->stats();
    const int64_t row_bytes = st.rows * 4;  // one int per row
    EXPECT_EQ(st.upload_index_bytes, (2 + 1 + 1) * row_bytes);
    EXPECT_LT(st.upload_bytes, st.upload_region_bytes);
    ASSERT_TRUE(store.ZeroGrad().ok());
    ASSERT_TRUE((*engine)->Run(graphs, RunOptions()).ok());
    // Training adds the labels, the parents' rows (gradients to the children), the dropout's
    // uids, and the tokens' rows for the embedding's gradient (a CSR: distinct tokens + 1
    // offsets, one id per row with a token).
    absl::StatusOr<Plan> plan = (*engine)->PlanBatch(graphs);
    ASSERT_TRUE(plan.ok());
    const int64_t token_csr =
        plan->ArrayLength(plan->token_row_offsets) + plan->ArrayLength(plan->token_row_ids);
    const int32_t* tokens = plan->Ints(plan->tokens);
    const int64_t tokened =
        std::count_if(tokens, tokens + plan->num_rows, [](int32_t t) { return t >= 0; });
    EXPECT_EQ(token_csr, static_cast<int64_t>(plan->unique_tokens.size()) + 1 + tokened);
    EXPECT_EQ((*engine)->stats().upload_index_bytes,
              (dropout > 0 ? 5 : 4) * row_bytes + token_csr * 4);
  }
}

// Of the rows children push into, a batch zeroes only those with an empty slot: on full binary
// trees the leaves (round 0), where the Tree-LSTM reads c_l and c_r as zero; an inference batch
// zeroes nothing else but the 2 loss statistics (16 floats). Training zeroes the gradient
// accumulators too. (The engine suite runs on NaN-poisoned buffers: a row read before written
// shows there.)
TEST(EngineTest, OnlyRowsWithAnEmptySlotStartAtZero) {
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  core::Rng rng(29);
  const std::vector<Graph> graphs = Trees(rng, 8, 12);
  int64_t leaves = 0;
  for (const Graph& g : graphs) {
    for (int v = 0; v < g.num_vertices(); ++v) {
      ASSERT_TRUE(g.num_children(v) == 0 || g.num_children(v) == 2) << "a full binary tree";
      leaves += g.num_children(v) == 0;
    }
  }
  core::ParameterStore store(5);
  auto engine = Engine::Create(&*f, &store);
  ASSERT_TRUE(engine.ok());
  absl::StatusOr<Plan> plan = (*engine)->PlanBatch(graphs);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->slots_full_from, leaves);
  RunOptions infer;
  infer.training = false;
  infer.backward = false;
  ASSERT_TRUE((*engine)->Run(graphs, infer, *plan).ok());
  const int64_t pushed_width = 4 * Cell().hidden;  // [h_l, h_r], c_l, c_r
  EXPECT_EQ((*engine)->stats().zeroed_bytes, 4 * (16 + leaves * pushed_width));
  ASSERT_TRUE(store.ZeroGrad().ok());
  ASSERT_TRUE((*engine)->Run(graphs, RunOptions(), *plan).ok());
  EXPECT_GT((*engine)->stats().zeroed_bytes, 4 * (16 + leaves * pushed_width));
}

// Inference with the embeddings' input projections folded (Engine::FoldInputProjections): the
// same loss, predictions and outputs as the plain inference run, on trees (x W starts the gates'
// sum with its bias), chains (every vertex has a token), through a dropout (a copy in
// inference), two projections of one embedding (the child-sum Tree-LSTM), and on trees whose
// tokens leave gaps in their rows (internal vertices with and without one: the GEMM then runs,
// as a gap must read the bias, not zeros). Where folded, the leaves' GEMM is gone from the
// FLOPs and the embedding's gather from the launches; after the parameters change, folding
// again follows them.
TEST(EngineTest, FoldedInputProjectionsMatchThePlainRun) {
  core::Rng rng(31);
  struct Case {
    std::string what;
    absl::StatusOr<vertex::Function> f;
    std::vector<Graph> graphs;
    // Fewer GEMM FLOPs folded (1), the same (0: a token row without a token), or either (-1:
    // x W after another pre-ops term may take the GEMM).
    int folds;
    int projections = 1;
    int launches_saved = 1;  // the embedding's gather, where nothing else reads it
  };
  vertex::models::CellConfig with_dropout = Cell();
  with_dropout.dropout = 0.5f;
  std::vector<Graph> gappy;
  for (int i = 0; i < 6; ++i) {
    gappy.push_back(
        RandomTree(rng, 2 + static_cast<int>(rng.UniformInt(10)),
                   {.vocab = 50, .classes = 5, .token_prob = 0.7, .internal_tokens = true}));
  }
  std::vector<Case> cases;
  cases.push_back(
      {"Tree-LSTM trees", vertex::models::BinaryTreeLstm(Cell()), Trees(rng, 6, 12), 1});
  cases.push_back({"LSTM chains", vertex::models::Lstm(Cell()), Chains(rng, 6, 12), 1});
  // The dropout's copy goes too (its step runs nothing else).
  cases.push_back({"Tree-LSTM with dropout", vertex::models::BinaryTreeLstm(with_dropout),
                   Trees(rng, 6, 12), 1, 1, 2});
  cases.push_back({"tokens with gaps", vertex::models::BinaryTreeLstm(Cell()), gappy, 0, 1, 0});
  // Two projections of one embedding (x W into the gates, x Wf into the forget gates).
  cases.push_back({"child-sum Tree-LSTM", vertex::models::ChildSumTreeLstm(Cell(), 2),
                   Trees(rng, 6, 12), 1, 2});
  // The Dropout emptied in a step that runs other work: the step still runs.
  cases.push_back({"dropout beside other work", testing::FoldedDropoutBesideOtherWork(5),
                   Chains(rng, 6, 12), 1, 1, 1});
  // Embeddings read besides the folded projection: still gathered (the GEMM after another
  // pre-ops term, and the second projection of one sum, still multiply x).
  const char* besides[] = {"a gathered field", "a Concat input", "after a pull's projection",
                           "two projections in one sum"};
  for (bool dropout : {false, true}) {
    for (int which = 0; which < 4; ++which) {
      cases.push_back({absl::StrCat("x read as ", besides[which], dropout ? ", a Dropout" : ""),
                       testing::EmbedReadBesidesAFold(which, 5, dropout), Chains(rng, 6, 12),
                       which == 2 ? -1 : 1, which == 3 ? 2 : 1, 0});
    }
  }
  for (const core::Device device : Devices()) {
    for (Case& cs : cases) {
      SCOPED_TRACE(cs.what + " on " + device.DebugString());
      ASSERT_TRUE(cs.f.ok()) << cs.f.status();
      core::ParameterStore store(7, device);
      EngineOptions eo;
      eo.device = device;
      eo.poison_buffers = true;  // a row the folded run reads but never writes shows
      auto engine = Engine::Create(&*cs.f, &store, eo);
      ASSERT_TRUE(engine.ok());
      EXPECT_EQ((*engine)->foldable_projections(), cs.projections);
      RunOptions plain;
      plain.training = false;
      plain.backward = false;
      plain.keep_outputs = true;
      RunOptions folded = plain;
      folded.folded_projections = true;
      EXPECT_EQ((*engine)->Run(cs.graphs, folded).status().code(),
                absl::StatusCode::kFailedPrecondition)
          << "before FoldInputProjections";
      for (int step = 0; step < 2; ++step) {
        absl::StatusOr<RunResult> want = (*engine)->Run(cs.graphs, plain);
        ASSERT_TRUE(want.ok()) << want.status();
        const int64_t plain_flops = (*engine)->stats().gemm_flops;
        const int64_t plain_commands = (*engine)->stats().commands;
        ASSERT_TRUE((*engine)->FoldInputProjections().ok());
        absl::StatusOr<RunResult> got = (*engine)->Run(cs.graphs, folded);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_NEAR(got->loss_sum, want->loss_sum, kTolerance * std::max(1.0, want->loss_sum));
        // Folded, the table's rows E op(W) (+ b) come from another GEMM than x W (+ b): the
        // outputs differ by float32 rounding, so a near tie may be predicted either way.
        ASSERT_EQ(got->outputs.size(), want->outputs.size());
        ASSERT_EQ(got->predictions.size(), want->predictions.size());
        for (size_t g = 0; g < got->outputs.size(); ++g) {
          const std::vector<double> w(want->outputs[g].begin(), want->outputs[g].end());
          EXPECT_LT(RelErr(got->outputs[g], w), kTolerance) << "graph " << g;
          double scale = 1e-3;
          for (float x : want->outputs[g]) scale = std::max(scale, std::fabs(double{x}));
          EXPECT_TRUE(SamePredictionsOffTies(got->predictions[g], want->predictions[g],
                                             want->outputs[g], kTolerance * scale))
              << "graph " << g;
        }
        // Folded, the embedding's gather goes too: nothing else reads its rows.
        if (cs.folds == 1) EXPECT_LT((*engine)->stats().gemm_flops, plain_flops);
        if (cs.folds == 0) EXPECT_EQ((*engine)->stats().gemm_flops, plain_flops);
        EXPECT_EQ((*engine)->stats().commands, plain_commands - cs.launches_saved);
        // A training step moves the parameters: the next pass folds them again.
        RunOptions train;
        ASSERT_TRUE(store.ZeroGrad().ok());
        ASSERT_TRUE((*engine)->Run(cs.graphs, train).ok());
        for (const auto& p : store.parameters()) {
          if (p->sparse_grad) continue;
          std::vector<float> v = p->value.ToVector(), g = p->grad.ToVector();
          for (size_t i = 0; i < v.size(); ++i) v[i] -= 0.5f * g[i];
          ASSERT_TRUE(p->value.CopyFrom(core::Tensor::FromVector(v, p->value.shape())).ok());
        }
      }
    }
  }
  // Training or a backward with folded projections is an error.
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  core::ParameterStore store(7);
  auto engine = Engine::Create(&*f, &store);
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->FoldInputProjections().ok());
  RunOptions bad;
  bad.folded_projections = true;
  EXPECT_EQ((*engine)->Run(Trees(rng, 2, 4), bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// GEMMs run only over rows that can be nonzero and are read: with every leaf in round 0 and
// tokens only on leaves, x W runs over the leaves alone and [h_l, h_r] U over the internal
// vertices alone (round 0 has no children, so its h U is skipped outright), forward and backward.
TEST(EngineTest, GemmsSkipRowsKnownZero) {
  const vertex::models::CellConfig c = Cell();
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(c);
  ASSERT_TRUE(f.ok());
  core::Rng rng(11);
  const std::vector<Graph> graphs = Trees(rng, 20, 12);
  int64_t leaves = 0, all = 0;
  for (const Graph& g : graphs) {
    for (int v = 0; v < g.num_vertices(); ++v) leaves += g.num_children(v) == 0 ? 1 : 0;
    all += g.num_vertices();
  }
  const int64_t internal = all - leaves;
  const int64_t e = c.embed, h = c.hidden, k = c.classes;
  // One pass of x W, [h_l, h_r] U and the output layer over their rows.
  const int64_t pass = 2 * leaves * e * 5 * h + 2 * internal * 2 * h * 5 * h + 2 * all * h * k;
  const auto [infer, train] = InferThenTrain(*f, graphs);
  EXPECT_EQ(infer.gemm_flops, pass);
  // Forward, the input gradients, and the weight gradients: three passes.
  EXPECT_EQ(train.gemm_flops, 3 * pass);
}

// A round's GEMM and the fused step after it are recorded as one GemmThenElementwise call
// (which a device may run as one launch), forward, in every round with internal vertices
// (round 0 has only leaves, whose [h_l, h_r] U is skipped); backward the fused step comes
// first. A batch under 128 rows: above, the CPU packs the weight and calls GemmPackedB,
// which is not joined. The results are checked by the rest of the suite, whose reference
// comparisons run through the same calls.
TEST(EngineTest, RoundGemmsJoinTheirPrograms) {
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  core::Rng rng(13);
  const std::vector<Graph> graphs = Trees(rng, 4, 12);
  const auto [infer, train] = InferThenTrain(*f, graphs);
  ASSERT_LT(infer.rows, 128);
  EXPECT_EQ(infer.gemm_programs, infer.rounds - 1);
  EXPECT_EQ(train.gemm_programs, infer.rounds - 1);
}

// Submit/Finish pipelined (batch i+1 and its optimizer step queued before batch i's results
// are read) gives what Run gives, step after step of training: the same losses, predictions
// and outputs, and the same parameters at the end, bit for bit on every device: on trees nothing
// is summed with atomic adds in an order that varies (the embedding's rows are summed per token
// from the plan's CSR; on CUDA column sums and the loss statistics meet in a workspace).
TEST(EngineTest, SubmitAndFinishPipelinedMatchRun) {
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  core::Rng rng(21);
  std::vector<std::vector<Graph>> batches;
  for (int b = 0; b < 7; ++b) batches.push_back(Trees(rng, 1 + b * 3, 9));
  for (core::Device device : Devices()) {
    SCOPED_TRACE(device.DebugString());
    struct Trainer {
      std::unique_ptr<core::ParameterStore> store;
      std::unique_ptr<Engine> engine;
      std::unique_ptr<core::Optimizer> opt;
    };
    auto make = [&]() {
      Trainer t;
      t.store = std::make_unique<core::ParameterStore>(3, device);
      EngineOptions eo;
      eo.device = device;
      auto e = Engine::Create(&*f, t.store.get(), eo);
      EXPECT_TRUE(e.ok()) << e.status();
      if (e.ok()) t.engine = std::move(*e);
      auto o = core::MakeOptimizer({.kind = core::OptimizerKind::kAdagrad, .lr = 0.1f});
      EXPECT_TRUE(o.ok());
      if (o.ok()) t.opt = std::move(*o);
      return t;
    };
    Trainer serial = make(), piped = make();
    ASSERT_TRUE(serial.engine != nullptr && piped.engine != nullptr);
    RunOptions ro = Options();
    std::vector<RunResult> want;
    for (const auto& graphs : batches) {
      ASSERT_TRUE(serial.store->ZeroGrad().ok());
      absl::StatusOr<RunResult> r = serial.engine->Run(graphs, ro);
      ASSERT_TRUE(r.ok()) << r.status();
      want.push_back(std::move(*r));
      ASSERT_TRUE(serial.opt->Step(*serial.store).ok());
    }
    std::vector<RunResult> got;
    std::optional<PendingRun> pending;
    for (const auto& graphs : batches) {
      absl::StatusOr<Plan> plan = piped.engine->PlanBatch(graphs);
      ASSERT_TRUE(plan.ok());
      ASSERT_TRUE(piped.store->ZeroGrad().ok());
      absl::StatusOr<PendingRun> next = piped.engine->Submit(*plan, ro);
      ASSERT_TRUE(next.ok()) << next.status();
      ASSERT_TRUE(piped.opt->Step(*piped.store).ok());
      if (pending.has_value()) {
        absl::StatusOr<RunResult> r = piped.engine->Finish(std::move(*pending));
        ASSERT_TRUE(r.ok()) << r.status();
        got.push_back(std::move(*r));
      }
      pending = std::move(*next);
    }
    absl::StatusOr<RunResult> last = piped.engine->Finish(std::move(*pending));
    ASSERT_TRUE(last.ok()) << last.status();
    got.push_back(std::move(*last));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      SCOPED_TRACE("batch " + std::to_string(i));
      EXPECT_EQ(got[i].loss_sum, want[i].loss_sum);
      EXPECT_EQ(got[i].labelled, want[i].labelled);
      EXPECT_EQ(got[i].vertices, want[i].vertices);
      EXPECT_EQ(got[i].correct, want[i].correct);
      EXPECT_EQ(got[i].predictions, want[i].predictions);
      EXPECT_EQ(got[i].outputs, want[i].outputs);
    }
    for (const vertex::ParamInfo& p : f->params()) {
      EXPECT_EQ(piped.store->Find(p.name)->value.ToVector(),
                serial.store->Find(p.name)->value.ToVector())
          << p.name;
    }
  }
}

// What a sequence of runs gave: each run's result and the engine's stats after it, and the
// parameters after the last.
struct RunsOutcome {
  std::vector<RunResult> results;
  std::vector<std::vector<float>> params;
  std::vector<EngineStats> stats;
};

std::vector<std::vector<float>> ParamValues(const vertex::Function& f,
                                            core::ParameterStore& store) {
  std::vector<std::vector<float>> values;
  for (const vertex::ParamInfo& p : f.params()) {
    values.push_back(store.Find(p.name)->value.ToVector());
  }
  return values;
}

// `got` is `want` bit for bit: every run's loss, correct count, predictions and outputs, and
// the parameters after.
void ExpectSameBits(const RunsOutcome& want, const RunsOutcome& got) {
  ASSERT_EQ(want.results.size(), got.results.size());
  for (size_t i = 0; i < want.results.size(); ++i) {
    SCOPED_TRACE("run " + std::to_string(i));
    const RunResult &w = want.results[i], &g = got.results[i];
    EXPECT_EQ(g.loss_sum, w.loss_sum);
    EXPECT_EQ(g.correct, w.correct);
    EXPECT_EQ(g.predictions, w.predictions);
    EXPECT_EQ(g.outputs, w.outputs);
  }
  EXPECT_EQ(got.params, want.params);
}

// CUDA graphs (KernelOptions::cuda.graphs): the same batches trained and evaluated with each
// batch's launches captured into one graph, pipelined (Submit of batch i+1 before Finish of i,
// so an executable graph is updated while the last launch of it may still run), give the bits of
// the launch-by-launch run: losses, predictions, outputs and the parameters after every step.
// Batch sizes repeat, so both updated and newly made graphs run. A lone Run goes launch by
// launch either way.
TEST(EngineTest, CudaGraphsGiveTheBitsOfLaunchByLaunch) {
  if (Devices().size() < 2) GTEST_SKIP() << "no CUDA device on this machine";
  const core::Device device = core::Device::Cuda(0);
  const ops::KernelOptions before = ops::GetKernelOptions();
  core::Rng rng(33);
  std::vector<std::vector<Graph>> tree_batches, chain_batches;
  for (int b = 0; b < 8; ++b) tree_batches.push_back(Trees(rng, 4 + (b % 3) * 5, 9));
  for (int b = 0; b < 6; ++b) chain_batches.push_back(Chains(rng, 3 + (b % 2) * 4, 12));
  struct Case {
    absl::StatusOr<vertex::Function> f;
    const std::vector<std::vector<Graph>>* batches;
  };
  Case cases[] = {{vertex::models::BinaryTreeLstm(Cell()), &tree_batches},
                  {vertex::models::Lstm(Cell()), &chain_batches}};
  // Trains on every batch (pipelined when `graphs`), then evaluates every batch; returns the
  // results in order and the parameters after training.
  auto run = [&](const vertex::Function& f, const std::vector<std::vector<Graph>>& batches,
                 bool graphs) -> absl::StatusOr<RunsOutcome> {
    ops::KernelOptions ko = before;
    ko.cuda.graphs = graphs;
    core::ParameterStore store(3, device);
    EngineOptions eo;
    eo.device = device;
    eo.kernels = ko;
    CAVS_ASSIGN_OR_RETURN(std::unique_ptr<Engine> e, Engine::Create(&f, &store, eo));
    CAVS_ASSIGN_OR_RETURN(std::unique_ptr<core::Optimizer> opt,
                          core::MakeOptimizer({.kind = core::OptimizerKind::kAdagrad, .lr = 0.1f}));
    RunsOutcome out;
    RunOptions train = Options();
    train.training = true;
    std::optional<PendingRun> pending;
    for (const auto& graphs_of_batch : batches) {
      CAVS_ASSIGN_OR_RETURN(Plan plan, e->PlanBatch(graphs_of_batch));
      CAVS_RETURN_IF_ERROR(store.ZeroGrad());
      CAVS_ASSIGN_OR_RETURN(PendingRun next, e->Submit(plan, train));
      out.stats.push_back(e->stats());
      CAVS_RETURN_IF_ERROR(opt->Step(store));
      if (pending.has_value()) {
        CAVS_ASSIGN_OR_RETURN(RunResult r, e->Finish(std::move(*pending)));
        out.results.push_back(std::move(r));
      }
      pending = std::move(next);
    }
    CAVS_ASSIGN_OR_RETURN(RunResult last, e->Finish(std::move(*pending)));
    out.results.push_back(std::move(last));
    RunOptions infer = Options();
    infer.backward = false;
    for (const auto& graphs_of_batch : batches) {
      CAVS_ASSIGN_OR_RETURN(Plan plan, e->PlanBatch(graphs_of_batch));
      CAVS_ASSIGN_OR_RETURN(PendingRun p, e->Submit(plan, infer));
      out.stats.push_back(e->stats());
      CAVS_ASSIGN_OR_RETURN(RunResult r, e->Finish(std::move(p)));
      out.results.push_back(std::move(r));
    }
    CAVS_ASSIGN_OR_RETURN(RunResult lone, e->Run(batches[0], infer));
    out.stats.push_back(e->stats());
    out.results.push_back(std::move(lone));
    out.params = ParamValues(f, store);
    return out;
  };
  for (Case& c : cases) {
    ASSERT_TRUE(c.f.ok()) << c.f.status();
    SCOPED_TRACE(c.f->name());
    absl::StatusOr<RunsOutcome> plain = run(*c.f, *c.batches, false);
    absl::StatusOr<RunsOutcome> graphed = run(*c.f, *c.batches, true);
    ASSERT_TRUE(ops::SetKernelOptions(before).ok());
    ASSERT_TRUE(plain.ok()) << plain.status();
    ASSERT_TRUE(graphed.ok()) << graphed.status();
    ExpectSameBits(*plain, *graphed);
    for (size_t i = 0; i + 1 < graphed->stats.size(); ++i) {
      SCOPED_TRACE("run " + std::to_string(i));
      EXPECT_FALSE(plain->stats[i].graph);
      EXPECT_TRUE(graphed->stats[i].graph) << "the batch went launch by launch";
      EXPECT_GT(plain->stats[i].host_launches, graphed->stats[i].host_launches);
      if (i >= c.batches->size()) {  // inference: the upload, a fill, the graph, the read-back
        EXPECT_LE(graphed->stats[i].host_launches, 10);
      }
    }
    EXPECT_FALSE(graphed->stats.back().graph) << "a lone Run";
  }
}

// Row offsets (KernelOptions::cpu.ew_row_offset, cuda.ew_row_offset): each step's fused program
// recorded once and run by every round at its rows gives the bits of a copy per round:
// losses, predictions, outputs and the parameters after every step, for trees (pushes,
// folded sums), chains, and child sums (segment reductions, pulls), on every device. With
// offsets the programs recorded do not grow with the rounds; without, a copy per round.
TEST(EngineTest, RowOffsetsGiveTheBitsOfAProgramPerRound) {
  const ops::KernelOptions before = ops::GetKernelOptions();
  const vertex::models::CellConfig cell = Cell();
  core::Rng rng(41);
  std::vector<std::vector<Graph>> tree_batches, chain_batches;
  for (int b = 0; b < 4; ++b) tree_batches.push_back(Trees(rng, 3 + b * 2, 9));
  for (int b = 0; b < 4; ++b) chain_batches.push_back(Chains(rng, 2 + b, 6 + 8 * b));
  struct Case {
    absl::StatusOr<vertex::Function> f;
    const std::vector<std::vector<Graph>>* batches;
  };
  Case cases[] = {{vertex::models::BinaryTreeLstm(cell), &tree_batches},
                  {vertex::models::ChildSumTreeLstm(cell, 2), &tree_batches},
                  {vertex::models::Lstm(cell), &chain_batches}};
  auto run = [&](core::Device device, const vertex::Function& f,
                 const std::vector<std::vector<Graph>>& batches,
                 bool offsets) -> absl::StatusOr<RunsOutcome> {
    ops::KernelOptions ko = before;
    ko.cpu.ew_row_offset = offsets;
    ko.cuda.ew_row_offset = offsets;
    core::ParameterStore store(3, device);
    EngineOptions eo;
    eo.device = device;
    eo.kernels = ko;
    eo.poison_buffers = true;
    CAVS_ASSIGN_OR_RETURN(std::unique_ptr<Engine> e, Engine::Create(&f, &store, eo));
    CAVS_ASSIGN_OR_RETURN(std::unique_ptr<core::Optimizer> opt,
                          core::MakeOptimizer({.kind = core::OptimizerKind::kAdagrad, .lr = 0.1f}));
    RunsOutcome out;
    RunOptions train = Options();
    train.training = true;
    for (const auto& graphs : batches) {
      CAVS_RETURN_IF_ERROR(store.ZeroGrad());
      CAVS_ASSIGN_OR_RETURN(RunResult r, e->Run(graphs, train));
      out.results.push_back(std::move(r));
      out.stats.push_back(e->stats());
      CAVS_RETURN_IF_ERROR(opt->Step(store));
    }
    RunOptions infer = Options();
    infer.backward = false;
    for (const auto& graphs : batches) {
      CAVS_ASSIGN_OR_RETURN(RunResult r, e->Run(graphs, infer));
      out.results.push_back(std::move(r));
      out.stats.push_back(e->stats());
    }
    out.params = ParamValues(f, store);
    return out;
  };
  for (const core::Device device : Devices()) {
    for (Case& c : cases) {
      ASSERT_TRUE(c.f.ok()) << c.f.status();
      SCOPED_TRACE(c.f->name() + " on " + device.DebugString());
      absl::StatusOr<RunsOutcome> copies = run(device, *c.f, *c.batches, false);
      absl::StatusOr<RunsOutcome> offsets = run(device, *c.f, *c.batches, true);
      ASSERT_TRUE(ops::SetKernelOptions(before).ok());
      ASSERT_TRUE(copies.ok()) << copies.status();
      ASSERT_TRUE(offsets.ok()) << offsets.status();
      ExpectSameBits(*copies, *offsets);
      ASSERT_EQ(copies->stats.size(), offsets->stats.size());
      for (size_t i = 0; i < copies->stats.size(); ++i) {
        SCOPED_TRACE("run " + std::to_string(i));
        const EngineStats &cs = copies->stats[i], &os = offsets->stats[i];
        EXPECT_EQ(os.commands, cs.commands);
        EXPECT_GT(os.rounds, 1);
        EXPECT_LT(os.program_instrs, cs.program_instrs);
        // Every training batch (and every inference batch) records the same programs, whatever
        // its rounds.
        const size_t first = i < c.batches->size() ? 0 : c.batches->size();
        EXPECT_EQ(os.program_instrs, offsets->stats[first].program_instrs);
      }
      // Without offsets the longest batch records the most.
      EXPECT_GT(copies->stats[c.batches->size() - 1].program_instrs,
                copies->stats[0].program_instrs);
    }
  }
}

// A PendingRun not from Submit is an error; one dropped unfinished waits for its copies.
TEST(EngineTest, FinishNeedsASubmittedRun) {
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  core::ParameterStore store(3);
  auto engine = Engine::Create(&*f, &store);
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ((*engine)->Finish(PendingRun()).status().code(), absl::StatusCode::kFailedPrecondition);
  core::Rng rng(4);
  const std::vector<Graph> graphs = Trees(rng, 5, 6);
  absl::StatusOr<Plan> plan = (*engine)->PlanBatch(graphs);
  ASSERT_TRUE(plan.ok());
  RunOptions infer;
  infer.backward = false;
  { ASSERT_TRUE((*engine)->Submit(graphs, infer, *plan).ok()); }  // dropped
  absl::StatusOr<PendingRun> p = (*engine)->Submit(graphs, infer, *plan);
  ASSERT_TRUE(p.ok());
  absl::StatusOr<RunResult> r = (*engine)->Finish(std::move(*p));
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<RunResult> want = (*engine)->Run(graphs, infer);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(r->loss_sum, want->loss_sum);
  EXPECT_EQ(r->predictions, want->predictions);
}

}  // namespace
}  // namespace cavs::scheduler
