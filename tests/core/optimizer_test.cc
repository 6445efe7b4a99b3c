#include "core/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/device_plugin.h"
#include "core/optimizer_math.h"

namespace cavs::core {
namespace {

bool Contains(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

std::unique_ptr<Optimizer> Make(OptimizerConfig c) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = MakeOptimizer(c);
  CAVS_CHECK(opt.ok(), opt.status().ToString());
  return *std::move(opt);
}

// A store with one dense parameter "w" holding `values` and gradient `grad`.
Parameter* Dense(ParameterStore& store, const std::string& name, const std::vector<float>& values,
                 const std::vector<float>& grad) {
  const Shape shape({static_cast<int64_t>(values.size())});
  Parameter* p = *store.GetOrCreate(name, shape, Initializer::Zeros());
  CAVS_CHECK(p->value.CopyFrom(Tensor::FromVector(values, shape)).ok());
  CAVS_CHECK(p->grad.CopyFrom(Tensor::FromVector(grad, shape)).ok());
  return p;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(OptimizerConfigTest, ParseKindAndValidate) {
  EXPECT_EQ(*ParseOptimizerKind("sgd"), OptimizerKind::kSgd);
  EXPECT_EQ(*ParseOptimizerKind("Adagrad"), OptimizerKind::kAdagrad);
  EXPECT_EQ(*ParseOptimizerKind("adam"), OptimizerKind::kAdam);
  absl::StatusOr<OptimizerKind> bad = ParseOptimizerKind("rmsprop");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.status(), "unknown optimizer 'rmsprop'")) << bad.status();
  EXPECT_TRUE(Contains(bad.status(), "sgd, adagrad or adam")) << bad.status();

  OptimizerConfig c;
  EXPECT_TRUE(c.Validate().ok());
  c.lr = -1;
  EXPECT_TRUE(Contains(c.Validate(), "lr")) << c.Validate();
  c = OptimizerConfig{};
  c.beta1 = 1.0f;
  EXPECT_TRUE(Contains(c.Validate(), "beta1")) << c.Validate();
  c = OptimizerConfig{};
  c.eps = 0.0f;
  EXPECT_TRUE(Contains(c.Validate(), "eps")) << c.Validate();
  c = OptimizerConfig{};
  c.nesterov = true;
  EXPECT_TRUE(Contains(c.Validate(), "nesterov")) << c.Validate();
  c.weight_decay = NAN;
  EXPECT_FALSE(MakeOptimizer(c).ok());
}

TEST(SgdTest, PlainAndWeightDecay) {
  ParameterStore store;
  Parameter* w = Dense(store, "w", {1, 2}, {0.5f, -1});
  auto sgd = Make({.kind = OptimizerKind::kSgd, .lr = 0.1f});
  ASSERT_TRUE(sgd->Step(store).ok());
  ExpectNear(w->value.ToVector(), {0.95, 2.1});
  EXPECT_EQ(sgd->step(), 1);
  EXPECT_TRUE(sgd->StateTensors().empty());

  ParameterStore s2;
  Parameter* v = Dense(s2, "w", {1, 2}, {0.5f, -1});
  auto decayed = Make({.kind = OptimizerKind::kSgd, .lr = 0.1f, .weight_decay = 0.1f});
  ASSERT_TRUE(decayed->Step(s2).ok());
  // g + 0.1 w = (0.6, -0.8)
  ExpectNear(v->value.ToVector(), {1 - 0.06, 2 + 0.08});
}

TEST(SgdTest, MomentumAndNesterov) {
  ParameterStore store;
  Parameter* w = Dense(store, "w", {1}, {0.5f});
  auto sgd = Make({.kind = OptimizerKind::kSgd, .lr = 0.1f, .momentum = 0.9f});
  ASSERT_TRUE(sgd->Step(store).ok());  // v = 0.5, w = 0.95
  ExpectNear(w->value.ToVector(), {0.95});
  ASSERT_TRUE(sgd->Step(store).ok());  // v = 0.9 * 0.5 + 0.5 = 0.95, w = 0.855
  ExpectNear(w->value.ToVector(), {0.855});
  auto state = sgd->StateTensors();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].first, "w/momentum");
  ExpectNear(state[0].second.ToVector(), {0.95});

  ParameterStore s2;
  Parameter* n = Dense(s2, "w", {1}, {0.5f});
  auto nag = Make({.kind = OptimizerKind::kSgd, .lr = 0.1f, .momentum = 0.9f, .nesterov = true});
  ASSERT_TRUE(nag->Step(s2).ok());  // v = 0.5, d = 0.5 + 0.45 = 0.95
  ExpectNear(n->value.ToVector(), {0.905});
  ASSERT_TRUE(nag->Step(s2).ok());  // v = 0.95, d = 0.5 + 0.855 = 1.355
  ExpectNear(n->value.ToVector(), {0.7695});
}

TEST(AdagradTest, AccumulatesSquaredGradients) {
  ParameterStore store;
  Parameter* w = Dense(store, "w", {1}, {0.5f});
  auto opt = Make(
      {.kind = OptimizerKind::kAdagrad, .lr = 0.1f, .eps = 1e-10f, .initial_accumulator = 0.1f});
  ASSERT_TRUE(opt->Step(store).ok());  // a = 0.35
  ExpectNear(w->value.ToVector(), {1 - 0.05 / std::sqrt(0.35)});
  ASSERT_TRUE(opt->Step(store).ok());  // a = 0.6
  ExpectNear(w->value.ToVector(), {1 - 0.05 / std::sqrt(0.35) - 0.05 / std::sqrt(0.6)});
  auto state = opt->StateTensors();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].first, "w/adagrad_accum");
  ExpectNear(state[0].second.ToVector(), {0.6});

  ParameterStore s2;
  Parameter* v = Dense(s2, "w", {1}, {0.5f});
  auto decayed = Make({.kind = OptimizerKind::kAdagrad,
                       .lr = 0.1f,
                       .eps = 1e-10f,
                       .weight_decay = 0.1f,
                       .initial_accumulator = 0.1f});
  ASSERT_TRUE(decayed->Step(s2).ok());  // g = 0.5 + 0.1 * 1 = 0.6, a = 0.46
  ExpectNear(v->value.ToVector(), {1 - 0.06 / std::sqrt(0.46)});
}

TEST(AdamTest, BiasCorrectedSteps) {
  ParameterStore store;
  Parameter* w = Dense(store, "w", {1}, {0.5f});
  auto adam = Make({.kind = OptimizerKind::kAdam, .lr = 0.1f});
  ASSERT_TRUE(adam->Step(store).ok());
  // m = 0.05, v = 0.00025; m_hat = 0.5, v_hat = 0.25: w = 1 - 0.1 * 0.5 / (0.5 + 1e-8)
  ExpectNear(w->value.ToVector(), {1 - 0.05 / (0.5 + 1e-8)});
  auto state = adam->StateTensors();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].first, "w/adam_m");
  EXPECT_EQ(state[1].first, "w/adam_v");
  ExpectNear(state[0].second.ToVector(), {0.05}, 1e-7);
  ExpectNear(state[1].second.ToVector(), {0.00025}, 1e-8);
  w->grad.data<float>()[0] = -0.5f;
  ASSERT_TRUE(adam->Step(store).ok());
  // m = -0.005, v = 0.00049975; m_hat = -0.005 / 0.19, v_hat = 0.00049975 / 0.001999 = 0.25
  ExpectNear(w->value.ToVector(), {0.9 + 0.1 * (0.005 / 0.19) / 0.5}, 2e-6);
  EXPECT_EQ(adam->step(), 2);
}

TEST(AdamTest, DecoupledWeightDecay) {
  ParameterStore store;
  Parameter* w = Dense(store, "w", {1, -2}, {0.5f, 0.5f});
  auto adam = Make({.kind = OptimizerKind::kAdam, .lr = 0.1f, .weight_decay = 0.01f});
  ASSERT_TRUE(adam->Step(store).ok());
  // w (1 - lr wd) - lr * sign(g): the decay does not pass through the moments.
  ExpectNear(w->value.ToVector(), {0.999 - 0.1, -1.998 - 0.1});
}

TEST(ClipGradNormTest, ScalesDenseAndSparseTogether) {
  ParameterStore store;
  Parameter* w = Dense(store, "w", {0, 0}, {3, 4});
  Parameter* e = *store.GetOrCreate("e", {4, 1}, Initializer::Zeros(), true);
  ASSERT_TRUE(store.AccumulateSparseGrad(e, {2}, Tensor::FromVector({12}, {1, 1})).ok());
  absl::StatusOr<double> norm = ClipGradNorm(store, 6.5);
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_NEAR(*norm, 13.0, 1e-9);
  const double f = 6.5 / (13.0 + 1e-6);
  ExpectNear(w->grad.ToVector(), {3 * f, 4 * f});
  ExpectNear(e->grad_values.ToVector(), {12 * f}, 1e-5);
  // Below the threshold nothing changes.
  norm = ClipGradNorm(store, 100.0);
  EXPECT_NEAR(*norm, 6.5, 1e-5);
  ExpectNear(w->grad.ToVector(), {3 * f, 4 * f});
  EXPECT_FALSE(ClipGradNorm(store, 0.0).ok());
}

TEST(ClipGradNormTest, StepClipsFirstAndRejectsNonFinite) {
  ParameterStore store;
  Parameter* w = Dense(store, "w", {0, 0}, {3, 4});
  auto sgd = Make({.kind = OptimizerKind::kSgd, .lr = 1.0f, .clip_norm = 1.0f});
  ASSERT_TRUE(sgd->Step(store).ok());
  EXPECT_NEAR(sgd->last_grad_norm(), 5.0, 1e-9);
  ExpectNear(w->value.ToVector(), {-0.6, -0.8}, 1e-6);

  w->grad.data<float>()[0] = NAN;
  absl::Status s = sgd->Step(store);
  EXPECT_TRUE(Contains(s, "gradient norm is nan")) << s;
  ExpectNear(w->value.ToVector(), {-0.6, -0.8}, 1e-6);
  EXPECT_EQ(sgd->step(), 1);
}

// One step with a sparse gradient equals the dense step on the touched rows and leaves the
// other rows, and their state, exactly as they were.
void CheckSparseMatchesDense(const OptimizerConfig& config) {
  SCOPED_TRACE(config.DebugString());
  ParameterStore sparse_store(3), dense_store(3);
  Parameter* s = *sparse_store.GetOrCreate("emb", {5, 3}, Initializer::Uniform(-1, 1), true);
  Parameter* d = *dense_store.GetOrCreate("emb", {5, 3}, Initializer::Uniform(-1, 1));
  const std::vector<float> before = s->value.ToVector();
  ASSERT_EQ(before, d->value.ToVector());
  const std::vector<int64_t> rows = {3, 0};
  const std::vector<float> g = {0.5f, -1.0f, 2.0f, 0.25f, 0.75f, -0.125f};
  ASSERT_TRUE(sparse_store.AccumulateSparseGrad(s, rows, Tensor::FromVector(g, {2, 3})).ok());
  std::vector<float> dense_grad(15, 0.0f);
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) dense_grad[rows[r] * 3 + c] = g[r * 3 + c];
  }
  ASSERT_TRUE(d->grad.CopyFrom(Tensor::FromVector(dense_grad, {5, 3})).ok());
  auto sparse_opt = Make(config), dense_opt = Make(config);
  ASSERT_TRUE(sparse_opt->Step(sparse_store).ok());
  ASSERT_TRUE(dense_opt->Step(dense_store).ok());
  const std::vector<float> sv = s->value.ToVector(), dv = d->value.ToVector();
  for (int64_t r = 0; r < 5; ++r) {
    const bool touched = r == 0 || r == 3;
    for (int c = 0; c < 3; ++c) {
      const int i = r * 3 + c;
      if (touched) {
        EXPECT_EQ(sv[i], dv[i]) << "row " << r;
        EXPECT_NE(sv[i], before[i]) << "row " << r;
      } else {
        EXPECT_EQ(sv[i], before[i]) << "untouched row " << r;
      }
    }
  }
  auto sstate = sparse_opt->StateTensors(), dstate = dense_opt->StateTensors();
  ASSERT_EQ(sstate.size(), dstate.size());
  const float init = config.kind == OptimizerKind::kAdagrad ? config.initial_accumulator : 0.0f;
  for (size_t k = 0; k < sstate.size(); ++k) {
    const std::vector<float> a = sstate[k].second.ToVector(), b = dstate[k].second.ToVector();
    for (int i = 0; i < 15; ++i) {
      const bool touched = i / 3 == 0 || i / 3 == 3;
      EXPECT_EQ(a[i], touched ? b[i] : init) << sstate[k].first << " element " << i;
    }
  }
}

TEST(SparseUpdateTest, TouchesOnlyGivenRowsAndMatchesDense) {
  CheckSparseMatchesDense({.kind = OptimizerKind::kSgd, .lr = 0.1f});
  CheckSparseMatchesDense(
      {.kind = OptimizerKind::kSgd, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f});
  CheckSparseMatchesDense({.kind = OptimizerKind::kAdagrad,
                           .lr = 0.1f,
                           .weight_decay = 0.01f,
                           .initial_accumulator = 0.1f});
  CheckSparseMatchesDense({.kind = OptimizerKind::kAdam, .lr = 0.01f, .weight_decay = 0.01f});
}

// The CPU kernels run vectorized loops; over a length with a vector body and a remainder, two
// steps of each optimizer equal the scalar per-element rule bit for bit.
TEST(CpuKernelsTest, VectorizedLoopsEqualTheScalarRule) {
  constexpr int n = 1037;
  std::vector<float> w0(n), g(n);
  for (int i = 0; i < n; ++i) {
    w0[i] = std::sin(0.37f * i);
    g[i] = std::cos(1.3f * i) * (i % 7 == 0 ? 100.0f : 0.01f);
  }
  const OptimizerConfig configs[] = {
      {.kind = OptimizerKind::kSgd, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f},
      {.kind = OptimizerKind::kAdagrad,
       .lr = 0.1f,
       .weight_decay = 0.01f,
       .initial_accumulator = 0.1f},
      {.kind = OptimizerKind::kAdam, .lr = 0.01f, .weight_decay = 0.01f},
  };
  for (const OptimizerConfig& c : configs) {
    ParameterStore store;
    Parameter* p = Dense(store, "w", w0, g);
    auto opt = Make(c);
    ASSERT_TRUE(opt->Step(store).ok());
    ASSERT_TRUE(opt->Step(store).ok());
    std::vector<float> want = w0, s0(n, c.kind == OptimizerKind::kAdagrad ? 0.1f : 0.0f),
                       s1(n, 0.0f);
    for (int t = 1; t <= 2; ++t) {
      AdamHyper adam{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, 1.0f, 1.0f};
      adam.bias_correction1 = static_cast<float>(1.0 - std::pow(double{c.beta1}, t));
      adam.bias_correction2 = static_cast<float>(1.0 - std::pow(double{c.beta2}, t));
      for (int i = 0; i < n; ++i) {
        switch (c.kind) {
          case OptimizerKind::kSgd:
            SgdElement({c.lr, c.momentum, c.weight_decay, c.nesterov}, want[i], g[i], s0[i]);
            break;
          case OptimizerKind::kAdagrad:
            AdagradElement({c.lr, c.eps, c.weight_decay}, want[i], g[i], s0[i]);
            break;
          case OptimizerKind::kAdam:
            AdamElement(adam, want[i], g[i], s0[i], s1[i]);
            break;
        }
      }
    }
    const std::vector<float> got = p->value.ToVector();
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], want[i]) << OptimizerKindName(c.kind) << " element " << i;
    }
  }
}

TEST(SparseUpdateTest, MalformedSparseGradientIsAnErrorAndChangesNothing) {
  ParameterStore store;
  Parameter* w = Dense(store, "w", {1}, {1});
  Parameter* e = *store.GetOrCreate("emb", {4, 2}, Initializer::Zeros(), true);
  e->grad_rows = {1, 1};
  e->grad_values = Tensor::FromVector({1, 2, 3, 4}, {2, 2});
  auto adam = Make({.kind = OptimizerKind::kAdam});
  absl::Status s = adam->Step(store);
  EXPECT_TRUE(Contains(s, "'emb'") && Contains(s, "not unique")) << s;
  EXPECT_EQ(w->value.ToVector(), (std::vector<float>{1}));
  EXPECT_EQ(e->value.ToVector(), std::vector<float>(8, 0.0f));
  EXPECT_EQ(adam->step(), 0);
}

TEST(OptimizerStateTest, EnsureAndResetState) {
  ParameterStore store;
  Dense(store, "a", {1, 2}, {0, 0});
  Dense(store, "b", {3}, {0});
  auto opt = Make({.kind = OptimizerKind::kAdagrad, .initial_accumulator = 0.5f});
  EXPECT_TRUE(opt->StateTensors().empty());  // lazily created
  ASSERT_TRUE(opt->EnsureState(store).ok());
  auto state = opt->StateTensors();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].first, "a/adagrad_accum");
  EXPECT_EQ(state[1].first, "b/adagrad_accum");
  EXPECT_EQ(state[0].second.ToVector(), (std::vector<float>{0.5f, 0.5f}));
  opt->ResetState();
  EXPECT_TRUE(opt->StateTensors().empty());

  ParameterStore other;
  Dense(other, "a", {1, 2, 3}, {0, 0, 0});
  ASSERT_TRUE(opt->EnsureState(store).ok());
  absl::Status s = opt->EnsureState(other);
  EXPECT_TRUE(Contains(s, "'a'") && Contains(s, "[2]") && Contains(s, "[3]")) << s;
}

// Forwards to the CPU kernels and counts the calls.
class CountingKernels final : public OptimizerKernels {
 public:
  OptimizerKernels* cpu = *GetOptimizerKernels(DeviceType::kCpu);
  absl::Status Sgd(const SgdHyper& h, absl::Span<const OptimizerSlot> s) override {
    ++calls;
    slots += s.size();
    return cpu->Sgd(h, s);
  }
  absl::Status Adagrad(const AdagradHyper& h, absl::Span<const OptimizerSlot> s) override {
    ++calls;
    slots += s.size();
    return cpu->Adagrad(h, s);
  }
  absl::Status Adam(const AdamHyper& h, absl::Span<const OptimizerSlot> s) override {
    ++calls;
    slots += s.size();
    last_adam = h;
    return cpu->Adam(h, s);
  }
  absl::StatusOr<double> SumOfSquares(absl::Span<const FloatBuffer> b) override {
    return cpu->SumOfSquares(b);
  }
  absl::Status Scale(absl::Span<const FloatBuffer> b, float f) override { return cpu->Scale(b, f); }
  int calls = 0;
  size_t slots = 0;
  AdamHyper last_adam;
};

TEST(OptimizerKernelsTest, OneMultiTensorCallPerStepThroughTheRegistry) {
  CountingKernels counting;
  // The CPU's plug-in with the counting kernels (a copy of its core part: the test runs no ops).
  const std::shared_ptr<const DevicePlugin> cpu_plugin = GetDevicePlugin(DeviceType::kCpu);
  ASSERT_NE(cpu_plugin, nullptr);
  auto counting_plugin = std::make_shared<DevicePlugin>(*cpu_plugin);
  counting_plugin->optimizer_kernels = &counting;
  RegisterDevicePlugin(DeviceType::kCpu, counting_plugin);
  ParameterStore store;
  Dense(store, "a", {1}, {1});
  Dense(store, "b", {1, 2}, {1, 1});
  Parameter* e = *store.GetOrCreate("e", {3, 1}, Initializer::Zeros(), true);  // no rows: skipped
  auto adam = Make({.kind = OptimizerKind::kAdam, .beta1 = 0.5f, .beta2 = 0.75f});
  ASSERT_TRUE(adam->Step(store).ok());
  ASSERT_TRUE(store.AccumulateSparseGrad(e, {1}, Tensor::FromVector({1}, {1, 1})).ok());
  ASSERT_TRUE(adam->Step(store).ok());
  RegisterDevicePlugin(DeviceType::kCpu, cpu_plugin);
  EXPECT_EQ(counting.calls, 2);
  EXPECT_EQ(counting.slots, 5u);
  EXPECT_FLOAT_EQ(counting.last_adam.bias_correction1, 1 - 0.25f);
  EXPECT_FLOAT_EQ(counting.last_adam.bias_correction2, 1 - 0.5625f);
  EXPECT_EQ(*GetOptimizerKernels(DeviceType::kCpu), counting.cpu);
}

TEST(OptimizerKernelsTest, MissingDeviceKernelsAreAnError) {
  absl::StatusOr<OptimizerKernels*> k = GetOptimizerKernels(DeviceType::kCuda);
  if (k.ok()) GTEST_SKIP() << "CUDA optimizer kernels are registered";
  EXPECT_EQ(k.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(k.status(), "cuda")) << k.status();
}

}  // namespace
}  // namespace cavs::core
