// The CUDA optimizer kernels against the CPU ones: every rule, dense and row-sparse slots of
// several sizes in one call (several chunks of the multi-tensor kernel), gradient-norm helpers,
// and a whole Optimizer::Step on a CUDA ParameterStore against the same step on the CPU.
#include "ops/cuda/cuda_optimizer.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/optimizer.h"
#include "core/parameter.h"
#include "gtest/gtest.h"
#include "ops/cpu/cpu_optimizer.h"
#include "tests/ops/cuda/cuda_test_util.h"
#include "tests/ops/ops_test_util.h"

namespace cavs::ops::cuda {
namespace {

using testing::AllClose;
using testing::DeviceArray;
using testing::RandomFloats;

// One parameter's buffers, on the host and mirrored on the device.
struct Mirror {
  int64_t rows, cols;
  bool sparse;
  std::vector<int64_t> row_ids;
  std::vector<float> param, grad, s0, s1;
  std::unique_ptr<DeviceArray<float>> dparam, dgrad, ds0, ds1;

  Mirror(int64_t r, int64_t c, bool sp, uint32_t seed) : rows(r), cols(c), sparse(sp) {
    if (sparse) {
      for (int64_t i = seed % 3; i < rows; i += 3) row_ids.push_back(i);
    }
    const int64_t grad_rows = sparse ? static_cast<int64_t>(row_ids.size()) : rows;
    param = RandomFloats(rows * cols, seed);
    grad = RandomFloats(grad_rows * cols, seed + 1);
    s0 = RandomFloats(rows * cols, seed + 2, 0.0f, 1.0f);
    s1 = RandomFloats(rows * cols, seed + 3, 0.0f, 1.0f);
    dparam = std::make_unique<DeviceArray<float>>(param);
    dgrad = std::make_unique<DeviceArray<float>>(grad);
    ds0 = std::make_unique<DeviceArray<float>>(s0);
    ds1 = std::make_unique<DeviceArray<float>>(s1);
  }
  core::OptimizerSlot Slot(bool device) {
    core::OptimizerSlot s;
    s.param = device ? dparam->get() : param.data();
    s.grad = device ? dgrad->get() : grad.data();
    s.state0 = device ? ds0->get() : s0.data();
    s.state1 = device ? ds1->get() : s1.data();
    s.rows = rows;
    s.cols = cols;
    s.sparse = sparse;
    s.row_ids = row_ids.data();
    s.num_rows = static_cast<int64_t>(row_ids.size());
    return s;
  }
  void ExpectEqualOnDevice(const char* what) {
    EXPECT_TRUE(AllClose(dparam->Download(), param, 1e-5, 1e-6)) << what << " param";
    EXPECT_TRUE(AllClose(ds0->Download(), s0, 1e-5, 1e-6)) << what << " state0";
    EXPECT_TRUE(AllClose(ds1->Download(), s1, 1e-5, 1e-6)) << what << " state1";
  }
};

class CudaOptimizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAVS_SKIP_WITHOUT_CUDA();
    // Dense and sparse, below and above one chunk (16384 elements), and an empty one.
    params_.push_back(std::make_unique<Mirror>(3, 5, false, 1));
    params_.push_back(std::make_unique<Mirror>(300, 129, false, 10));
    params_.push_back(std::make_unique<Mirror>(1000, 50, true, 20));
    params_.push_back(std::make_unique<Mirror>(0, 7, false, 30));
    params_.push_back(std::make_unique<Mirror>(9, 4, true, 40));
  }
  std::vector<core::OptimizerSlot> Slots(bool device) {
    std::vector<core::OptimizerSlot> slots;
    for (auto& p : params_) slots.push_back(p->Slot(device));
    return slots;
  }
  void ExpectSame(const char* what) {
    for (auto& p : params_) p->ExpectEqualOnDevice(what);
  }

  core::OptimizerKernels* cpu_ = cpu::CpuOptimizerKernels();
  CudaOptimizerKernels* cuda_ = CudaOptimizerKernels::Global();
  std::vector<std::unique_ptr<Mirror>> params_;
};

TEST_F(CudaOptimizerTest, IsRegisteredForCuda) {
  absl::StatusOr<core::OptimizerKernels*> k = core::GetOptimizerKernels(core::DeviceType::kCuda);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(*k, cuda_);
}

TEST_F(CudaOptimizerTest, SgdMatchesTheCpu) {
  for (core::SgdHyper h :
       {core::SgdHyper{0.1f, 0.0f, 0.0f, false}, core::SgdHyper{0.05f, 0.9f, 0.01f, false},
        core::SgdHyper{0.05f, 0.9f, 0.0f, true}}) {
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(cuda_->Sgd(h, Slots(true)).ok());
      ASSERT_TRUE(cpu_->Sgd(h, Slots(false)).ok());
    }
    ExpectSame("sgd");
  }
}

TEST_F(CudaOptimizerTest, AdagradMatchesTheCpu) {
  const core::AdagradHyper h{0.1f, 1e-6f, 0.001f};
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(cuda_->Adagrad(h, Slots(true)).ok());
    ASSERT_TRUE(cpu_->Adagrad(h, Slots(false)).ok());
  }
  ExpectSame("adagrad");
}

TEST_F(CudaOptimizerTest, AdamMatchesTheCpu) {
  for (int step = 1; step <= 3; ++step) {
    core::AdamHyper h{0.01f, 0.9f, 0.999f, 1e-8f, 0.01f};
    h.bias_correction1 = 1.0f - std::pow(0.9f, static_cast<float>(step));
    h.bias_correction2 = 1.0f - std::pow(0.999f, static_cast<float>(step));
    ASSERT_TRUE(cuda_->Adam(h, Slots(true)).ok());
    ASSERT_TRUE(cpu_->Adam(h, Slots(false)).ok());
  }
  ExpectSame("adam");
}

TEST_F(CudaOptimizerTest, SumOfSquaresAndScale) {
  std::vector<core::FloatBuffer> host, dev;
  for (auto& p : params_) {
    host.push_back({p->param.data(), static_cast<int64_t>(p->param.size())});
    dev.push_back({p->dparam->get(), static_cast<int64_t>(p->param.size())});
  }
  absl::StatusOr<double> want = cpu_->SumOfSquares(host), got = cuda_->SumOfSquares(dev);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  EXPECT_NEAR(*got, *want, 1e-9 * *want);
  ASSERT_TRUE(cuda_->Scale(dev, -0.5f).ok());
  ASSERT_TRUE(cpu_->Scale(host, -0.5f).ok());
  ExpectSame("scale");
  absl::StatusOr<double> none = cuda_->SumOfSquares({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0.0);
}

TEST_F(CudaOptimizerTest, MalformedSlotsAreErrors) {
  std::vector<core::OptimizerSlot> slots = Slots(true);
  slots[2].row_ids = nullptr;
  EXPECT_EQ(cuda_->Adagrad(core::AdagradHyper{0.1f, 1e-6f, 0.0f}, slots).code(),
            absl::StatusCode::kInvalidArgument);
  slots = Slots(true);
  std::vector<int64_t> bad = {0, 1000};
  slots[2].row_ids = bad.data();
  slots[2].num_rows = 2;
  EXPECT_EQ(cuda_->Sgd(core::SgdHyper{0.1f, 0.0f, 0.0f, false}, slots).code(),
            absl::StatusCode::kInvalidArgument);
  slots = Slots(false);  // host memory is not a CUDA parameter
  EXPECT_EQ(cuda_->Sgd(core::SgdHyper{0.1f, 0.0f, 0.0f, false}, slots).code(),
            absl::StatusCode::kInvalidArgument);
}

// Optimizer::Step on a CUDA store against the same store on the CPU: dense and sparse
// parameters, Adam, with gradient clipping (SumOfSquares and Scale on the device).
TEST_F(CudaOptimizerTest, OptimizerStepOnCudaParameters) {
  core::ParameterStore cpu(7, core::Device::Cpu()), gpu(7, core::Device::Cuda(0));
  for (core::ParameterStore* store : {&cpu, &gpu}) {
    ASSERT_TRUE(
        store->GetOrCreate("W", core::Shape({40, 30}), core::Initializer::XavierUniform()).ok());
    ASSERT_TRUE(store
                    ->GetOrCreate("embed", core::Shape({100, 8}),
                                  core::Initializer::Uniform(-0.1f, 0.1f), true)
                    .ok());
  }
  core::OptimizerConfig config;
  config.kind = core::OptimizerKind::kAdam;
  config.lr = 0.01f;
  config.clip_norm = 0.5f;
  absl::StatusOr<std::unique_ptr<core::Optimizer>> opt_cpu = core::MakeOptimizer(config);
  absl::StatusOr<std::unique_ptr<core::Optimizer>> opt_gpu = core::MakeOptimizer(config);
  ASSERT_TRUE(opt_cpu.ok() && opt_gpu.ok());
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> dense = RandomFloats(40 * 30, 100 + step);
    const std::vector<float> rows = RandomFloats(3 * 8, 200 + step);
    const std::vector<int64_t> ids = {step, 50, 99 - step};
    for (core::ParameterStore* store : {&cpu, &gpu}) {
      ASSERT_TRUE(store->ZeroGrad().ok());
      ASSERT_TRUE(store->Find("W")->grad.CopyFrom(core::Tensor::FromVector(dense, {40, 30})).ok());
      ASSERT_TRUE(store
                      ->AccumulateSparseGrad(store->Find("embed"), ids,
                                             core::Tensor::FromVector(rows, {3, 8}))
                      .ok());
    }
    ASSERT_TRUE((*opt_cpu)->Step(cpu).ok());
    absl::Status s = (*opt_gpu)->Step(gpu);
    ASSERT_TRUE(s.ok()) << s;
  }
  for (const char* name : {"W", "embed"}) {
    EXPECT_TRUE(
        AllClose(gpu.Find(name)->value.ToVector(), cpu.Find(name)->value.ToVector(), 1e-5, 1e-6))
        << name;
  }
  EXPECT_NEAR((*opt_gpu)->last_grad_norm(), (*opt_cpu)->last_grad_norm(), 1e-6);
}

}  // namespace
}  // namespace cavs::ops::cuda
