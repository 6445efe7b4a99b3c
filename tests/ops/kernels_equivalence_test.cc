// Every Kernels implementation against the CPU one: one parameterized suite, instantiated for
// each non-CPU device this build may have. A device whose kernels are unavailable (a build
// without CUDA, a machine without a GPU) skips cleanly.
//
// Each test draws random inputs, runs the op on the CPU (host vectors) and on the device
// (tensors from core::Tensor::Empty on that device, filled with Tensor::CopyFrom), and compares:
// element-wise results within 1e-5 relative (the two devices' exp and tanh differ by a few
// ulps); GEMMs and column sums within twice the float32 bound of their sums (SumErrorBound:
// each device is within it of the exact sum, whatever order it sums in), relative to Σ|terms|,
// so that cancellation does not make the bound meaningless; other reductions within 1e-4; index
// outputs (argmax, predictions) and dropout masks exactly. Sizes are large enough to take the
// CPU's parallel paths. Adding an op to Kernels means adding a test here.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "core/tensor.h"
#include "gtest/gtest.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/kernels.h"
#include "tests/ops/ops_test_util.h"

namespace cavs::ops {
namespace {

using core::DType;
using core::Tensor;
using testing::AllClose;
using testing::GemmErrorBound;
using testing::GemmScale;
using testing::RandomFloats;
using testing::RandomInts;

constexpr double kElementwiseTol = 1e-5;
constexpr double kReductionTol = 1e-4;

class KernelsEquivalenceTest : public ::testing::TestWithParam<core::Device> {
 protected:
  void SetUp() override {
    absl::StatusOr<Kernels*> k = GetKernels(GetParam());
    if (!k.ok()) {
      GTEST_SKIP() << "no kernels for " << GetParam().DebugString() << ": " << k.status();
    }
    dev_ = *k;
    cpu_ = cpu::CpuKernels::Get();
  }

  // A device copy of `v` (float32 or int32 by T).
  template <typename T>
  Tensor Up(const std::vector<T>& v) {
    const DType dtype = std::is_same_v<T, float> ? DType::kFloat32 : DType::kInt32;
    const int64_t n = static_cast<int64_t>(v.size());
    Tensor host = Tensor::Host({n}, dtype);
    if (n > 0) std::memcpy(host.raw_data(), v.data(), v.size() * sizeof(T));
    absl::StatusOr<Tensor> t = Tensor::Empty({n}, dtype, GetParam());
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return Tensor();
    absl::Status s = t->CopyFrom(host);
    EXPECT_TRUE(s.ok()) << s;
    return *t;
  }

  // The contents of a device tensor, after the device has finished its queued work.
  template <typename T>
  std::vector<T> Down(const Tensor& t) {
    EXPECT_TRUE(dev_->Synchronize().ok());
    Tensor host = Tensor::Host(t.shape(), t.dtype());
    absl::Status s = host.CopyFrom(t);
    EXPECT_TRUE(s.ok()) << s;
    std::vector<T> v(static_cast<size_t>(t.numel()));
    if (!v.empty()) std::memcpy(v.data(), host.raw_data(), v.size() * sizeof(T));
    return v;
  }

  static float* F(const Tensor& t) { return static_cast<float*>(t.raw_data()); }
  static int32_t* I(const Tensor& t) { return static_cast<int32_t*>(t.raw_data()); }

  Kernels* dev_ = nullptr;
  Kernels* cpu_ = nullptr;
};

TEST_P(KernelsEquivalenceTest, Gemm) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int64_t m = 131, n = 77, k = 203;
      const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 5;
      const std::vector<float> a = RandomFloats((ta ? k : m) * lda, 1);
      const std::vector<float> b = RandomFloats((tb ? n : k) * ldb, 2);
      const std::vector<float> c0 = RandomFloats(m * ldc, 3);
      std::vector<float> c = c0;
      const Kernels::GemmCall on_cpu{ta,  tb,       m,   n,    k,        0.75f, a.data(),
                                     lda, b.data(), ldb, 0.5f, c.data(), ldc};
      const std::vector<double> scale = GemmScale(on_cpu);
      ASSERT_TRUE(cpu_->Gemm(on_cpu).ok());
      Tensor da = Up(a), db = Up(b), dc = Up(c0);
      ASSERT_TRUE(
          dev_->Gemm(ta, tb, m, n, k, 0.75f, F(da), lda, F(db), ldb, 0.5f, F(dc), ldc).ok());
      EXPECT_TRUE(AllClose(Down<float>(dc), std::vector<double>(c.begin(), c.end()),
                           2 * GemmErrorBound(k), 0.0, &scale))
          << "trans_a " << ta << " trans_b " << tb;
    }
  }
}

// Gemm with a bias row (Kernels::GemmBias), beta 0 and 0.5, sizes that take the device's
// GEMM paths by default (on CUDA a forward round's small GEMM and cuBLASLt's epilogue).
TEST_P(KernelsEquivalenceTest, GemmBias) {
  ASSERT_TRUE(dev_->GemmAddsBias());
  for (const int64_t m : {64, 131}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 0.5f}) {
        const int64_t n = 750, k = 300, lda = k, ldb = tb ? k : n, ldc = n;
        const std::vector<float> a = RandomFloats(m * lda, 4), b = RandomFloats(k * n, 5);
        const std::vector<float> c0 = RandomFloats(m * ldc, 6), bias = RandomFloats(n, 7);
        std::vector<float> c = c0;
        const Kernels::GemmCall on_cpu{false, tb,       m,   n,    k,        1.0f, a.data(),
                                       lda,   b.data(), ldb, beta, c.data(), ldc,  bias.data()};
        const std::vector<double> scale = GemmScale(on_cpu);
        ASSERT_TRUE(cpu_->Gemm(on_cpu).ok());
        Tensor da = Up(a), db = Up(b), dc = Up(c0), dbias = Up(bias);
        ASSERT_TRUE(dev_->Gemm(Kernels::GemmCall{false, tb, m, n, k, 1.0f, F(da), lda, F(db), ldb,
                                                 beta, F(dc), ldc, F(dbias)})
                        .ok());
        EXPECT_TRUE(AllClose(Down<float>(dc), std::vector<double>(c.begin(), c.end()),
                             2 * GemmErrorBound(k), 0.0, &scale))
            << "m " << m << " trans_b " << tb << " beta " << beta;
      }
    }
  }
}

// One instruction over operands held in three buffers (a, b, dst) and the uids; built twice,
// with host and with device pointers.
struct EwCase {
  EwOp op;
  int64_t a_ld, b_ld;
};

EwInstr MakeInstr(const EwCase& e, int64_t width, int64_t ld, float* a, float* b, float* dst,
                  const int32_t* uids) {
  EwInstr in;
  in.op = e.op;
  in.width = width;
  in.dst = {dst, e.op == EwOp::kSum ? 1 : ld};
  in.a = {a, e.a_ld};
  in.b = {b, e.b_ld};
  in.scalar = e.op == EwOp::kDropout ? 0.35f : 1.25f;
  in.offset = -0.5f;
  in.seed = 20260101;
  in.uids = uids;
  return in;
}

TEST_P(KernelsEquivalenceTest, ElementwiseEveryOp) {
  const int64_t rows = 1100, width = 45, ld = 47;
  const std::vector<float> a = RandomFloats(rows * ld, 4, -4.0f, 4.0f);
  const std::vector<float> b = RandomFloats(rows * ld, 5, -2.0f, 2.0f);
  const std::vector<float> dst0 = RandomFloats(rows * ld, 6);
  std::vector<int32_t> uids(rows);
  for (int64_t r = 0; r < rows; ++r) uids[r] = static_cast<int32_t>(3 * r + 1);
  Tensor da = Up(a), db = Up(b), duids = Up(uids);
  const EwOp ops[] = {EwOp::kCopy,      EwOp::kZero,       EwOp::kAdd,         EwOp::kSub,
                      EwOp::kMul,       EwOp::kAccumulate, EwOp::kSigmoid,     EwOp::kTanh,
                      EwOp::kRelu,      EwOp::kNeg,        EwOp::kScale,       EwOp::kSum,
                      EwOp::kBroadcast, EwOp::kDropout,    EwOp::kSigmoidGrad, EwOp::kTanhGrad,
                      EwOp::kReluGrad};
  for (EwOp op : ops) {
    for (EwCase e : {EwCase{op, ld, ld}, EwCase{op, 0, ld}, EwCase{op, ld, 0}}) {
      std::vector<float> cpu_dst = dst0;
      std::vector<float> a_host = a, b_host = b;
      EwInstr host =
          MakeInstr(e, width, ld, a_host.data(), b_host.data(), cpu_dst.data(), uids.data());
      ASSERT_TRUE(cpu_->Elementwise(&host, &host, 1, rows).ok());
      Tensor ddst = Up(dst0);
      EwInstr dev = MakeInstr(e, width, ld, F(da), F(db), F(ddst), I(duids));
      std::vector<int32_t> bytes(sizeof(EwInstr) / sizeof(int32_t));
      std::memcpy(bytes.data(), &dev, sizeof(EwInstr));
      Tensor dprog = Up(bytes);
      ASSERT_TRUE(
          dev_->Elementwise(&dev, static_cast<const EwInstr*>(dprog.raw_data()), 1, rows).ok());
      const std::vector<float> got = Down<float>(ddst);
      const double atol = op == EwOp::kSum ? 1e-5 : 1e-6;
      EXPECT_TRUE(AllClose(got, cpu_dst, kElementwiseTol, atol))
          << "op " << static_cast<int>(op) << " a_ld " << e.a_ld << " b_ld " << e.b_ld;
      if (op == EwOp::kDropout) {
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i] == 0.0f, cpu_dst[i] == 0.0f) << "dropout mask differs at " << i;
        }
      }
    }
  }
}

// A fused chain with in-place steps: instructions must see earlier results within a row.
TEST_P(KernelsEquivalenceTest, ElementwiseFusedChain) {
  const int64_t rows = 900, h = 40;
  const std::vector<float> g0 = RandomFloats(rows * 4 * h, 7, -3.0f, 3.0f);
  const std::vector<float> c0 = RandomFloats(rows * h, 8);
  auto program = [&](float* g, float* c_prev, float* c, float* hid) {
    const int64_t gl = 4 * h;
    return std::vector<EwInstr>{
        {EwOp::kSigmoid, 3 * h, {g, gl}, {g, gl}},
        {EwOp::kTanh, h, {g + 3 * h, gl}, {g + 3 * h, gl}},
        {EwOp::kMul, h, {c, h}, {g, gl}, {g + 3 * h, gl}},
        {EwOp::kMul, h, {g + h, gl}, {g + h, gl}, {c_prev, h}},
        {EwOp::kAccumulate, h, {c, h}, {g + h, gl}},
        {EwOp::kTanh, h, {hid, h}, {c, h}},
        {EwOp::kMul, h, {hid, h}, {hid, h}, {g + 2 * h, gl}},
    };
  };
  std::vector<float> g = g0, c_prev = c0, c(rows * h), hid(rows * h);
  std::vector<EwInstr> host = program(g.data(), c_prev.data(), c.data(), hid.data());
  ASSERT_TRUE(cpu_->Elementwise(host.data(), host.data(), 7, rows).ok());
  Tensor dg = Up(g0), dcp = Up(c0), dc = Up(c), dh = Up(hid);
  std::vector<EwInstr> dev = program(F(dg), F(dcp), F(dc), F(dh));
  std::vector<int32_t> bytes(dev.size() * sizeof(EwInstr) / sizeof(int32_t));
  std::memcpy(bytes.data(), dev.data(), dev.size() * sizeof(EwInstr));
  Tensor dprog = Up(bytes);
  ASSERT_TRUE(
      dev_->Elementwise(dev.data(), static_cast<const EwInstr*>(dprog.raw_data()), 7, rows).ok());
  EXPECT_TRUE(AllClose(Down<float>(dc), c, kElementwiseTol, 1e-6));
  EXPECT_TRUE(AllClose(Down<float>(dh), hid, kElementwiseTol, 1e-6));
  EXPECT_TRUE(AllClose(Down<float>(dg), g, kElementwiseTol, 1e-6));
}

TEST_P(KernelsEquivalenceTest, GatherRows) {
  const int64_t src_rows = 700, m = 1500, w = 50, src_ld = 53, dst_ld = 51;
  const std::vector<float> src = RandomFloats(src_rows * src_ld, 9);
  const std::vector<int32_t> idx = RandomInts(m, 10, -1, src_rows - 1);
  const std::vector<float> dst0 = RandomFloats(m * dst_ld, 11);
  std::vector<float> dst = dst0;
  ASSERT_TRUE(cpu_->GatherRows(src.data(), src_ld, idx.data(), m, w, dst.data(), dst_ld).ok());
  Tensor dsrc = Up(src), didx = Up(idx), ddst = Up(dst0);
  ASSERT_TRUE(dev_->GatherRows(F(dsrc), src_ld, I(didx), m, w, F(ddst), dst_ld).ok());
  EXPECT_EQ(Down<float>(ddst), dst);
}

TEST_P(KernelsEquivalenceTest, ScatterAddRows) {
  const int64_t m = 1500, w = 50, dst_rows = 400;
  const std::vector<float> src = RandomFloats(m * w, 12);
  const std::vector<float> dst0 = RandomFloats(dst_rows * w, 13);
  for (bool unique : {false, true}) {
    // Duplicates (and -1) for the general path; a permutation prefix for the unique one.
    std::vector<int32_t> idx = RandomInts(m, 14, -1, dst_rows - 1);
    if (unique) {
      for (int64_t i = 0; i < m; ++i)
        idx[i] = i < dst_rows ? static_cast<int32_t>(dst_rows - 1 - i) : -1;
    }
    std::vector<float> dst = dst0;
    ASSERT_TRUE(cpu_->ScatterAddRows(src.data(), w, idx.data(), m, w, dst.data(), w, unique).ok());
    Tensor dsrc = Up(src), didx = Up(idx), ddst = Up(dst0);
    ASSERT_TRUE(dev_->ScatterAddRows(F(dsrc), w, I(didx), m, w, F(ddst), w, unique).ok());
    EXPECT_TRUE(AllClose(Down<float>(ddst), dst, kReductionTol, 1e-5)) << "unique " << unique;
  }
}

// Several gathers and scatter-adds in one call, with different widths, strides and sources.
TEST_P(KernelsEquivalenceTest, RowCopiesMulti) {
  const int64_t m = 900, src_rows = 500;
  const std::vector<int64_t> widths = {150, 150, 37, 4};
  std::vector<std::vector<float>> srcs, dsts;
  std::vector<std::vector<int32_t>> idxs;
  std::vector<Tensor> dsrc, didx, ddst;
  for (size_t i = 0; i < widths.size(); ++i) {
    srcs.push_back(RandomFloats(src_rows * (widths[i] + 3), 40 + i));
    idxs.push_back(RandomInts(m, 50 + i, -1, static_cast<int32_t>(src_rows - 1)));
    dsts.push_back(RandomFloats(m * widths[i], 60 + i));
    dsrc.push_back(Up(srcs[i]));
    didx.push_back(Up(idxs[i]));
    ddst.push_back(Up(dsts[i]));
  }
  std::vector<RowCopy> cpu(widths.size()), dev(widths.size());
  for (size_t i = 0; i < widths.size(); ++i) {
    cpu[i] = {srcs[i].data(), widths[i] + 3, idxs[i].data(), widths[i], dsts[i].data(), widths[i]};
    dev[i] = {F(dsrc[i]), widths[i] + 3, I(didx[i]), widths[i], F(ddst[i]), widths[i]};
  }
  const int n = static_cast<int>(widths.size());
  ASSERT_TRUE(cpu_->GatherRowsMulti(cpu.data(), n, m).ok());
  ASSERT_TRUE(dev_->GatherRowsMulti(dev.data(), n, m).ok());
  for (size_t i = 0; i < widths.size(); ++i) EXPECT_EQ(Down<float>(ddst[i]), dsts[i]) << i;
  // Scatter back: rows i -> idx[i] (duplicates: the atomic path).
  for (size_t i = 0; i < widths.size(); ++i) {
    cpu[i] = {dsts[i].data(), widths[i], idxs[i].data(), widths[i], srcs[i].data(), widths[i] + 3};
    dev[i] = {F(ddst[i]), widths[i], I(didx[i]), widths[i], F(dsrc[i]), widths[i] + 3};
  }
  ASSERT_TRUE(cpu_->ScatterAddRowsMulti(cpu.data(), n, m, false).ok());
  ASSERT_TRUE(dev_->ScatterAddRowsMulti(dev.data(), n, m, false).ok());
  for (size_t i = 0; i < widths.size(); ++i) {
    EXPECT_TRUE(AllClose(Down<float>(dsrc[i]), srcs[i], kReductionTol, 1e-5)) << i;
  }
}

// Random segments (lengths 0..5, ids repeating across segments) over `src_rows` rows.
void RandomSegments(int64_t m, int64_t src_rows, std::vector<int32_t>* offsets,
                    std::vector<int32_t>* ids) {
  const std::vector<int32_t> lens = RandomInts(m, 15, 0, 5);
  offsets->assign(1, 0);
  for (int32_t len : lens) offsets->push_back(offsets->back() + len);
  *ids = RandomInts(offsets->back(), 16, 0, static_cast<int32_t>(src_rows - 1));
}

TEST_P(KernelsEquivalenceTest, SegmentReduceAndGrad) {
  const int64_t m = 1200, w = 37, src_rows = 600, ld = 40;
  std::vector<int32_t> offsets, ids;
  RandomSegments(m, src_rows, &offsets, &ids);
  const std::vector<float> src = RandomFloats(src_rows * ld, 17);
  const std::vector<float> dy = RandomFloats(m * ld, 18);
  const std::vector<float> ds0 = RandomFloats(src_rows * ld, 19);
  Tensor dsrc = Up(src), doff = Up(offsets), dids = Up(ids), ddy = Up(dy);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
    const std::string what = "op " + std::to_string(static_cast<int>(op));
    std::vector<float> out(m * ld, 0.0f);
    std::vector<int32_t> argmax(m * w, 0);
    ASSERT_TRUE(cpu_->SegmentReduce(op, src.data(), ld, offsets.data(), ids.data(), m, w,
                                    out.data(), ld, argmax.data())
                    .ok());
    Tensor dout = Up(std::vector<float>(m * ld, 0.0f)), dam = Up(std::vector<int32_t>(m * w, 0));
    ASSERT_TRUE(
        dev_->SegmentReduce(op, F(dsrc), ld, I(doff), I(dids), m, w, F(dout), ld, I(dam)).ok());
    EXPECT_TRUE(AllClose(Down<float>(dout), out, kReductionTol, 1e-6)) << what;
    if (op == ReduceOp::kMax) EXPECT_EQ(Down<int32_t>(dam), argmax) << what;

    std::vector<float> ds = ds0;
    ASSERT_TRUE(cpu_->SegmentReduceGrad(op, dy.data(), ld, offsets.data(), ids.data(),
                                        argmax.data(), m, w, ds.data(), ld)
                    .ok());
    Tensor dds = Up(ds0), dargmax = Up(argmax);
    ASSERT_TRUE(
        dev_->SegmentReduceGrad(op, F(ddy), ld, I(doff), I(dids), I(dargmax), m, w, F(dds), ld)
            .ok());
    EXPECT_TRUE(AllClose(Down<float>(dds), ds, kReductionTol, 1e-5)) << what << " grad";
  }
}

TEST_P(KernelsEquivalenceTest, SoftmaxCrossEntropy) {
  const int64_t n = 2000, c = 23, ld = 25;
  const std::vector<float> logits = RandomFloats(n * ld, 20, -6.0f, 6.0f);
  const std::vector<int32_t> labels = RandomInts(n, 21, -1, c - 1);
  std::vector<float> d(n * c), stats = {1.5f, 2.0f};
  std::vector<int32_t> pred(n);
  ASSERT_TRUE(cpu_->SoftmaxCrossEntropy(logits.data(), ld, n, c, labels.data(), 0.125f, d.data(),
                                        stats.data(), pred.data())
                  .ok());
  Tensor dl = Up(logits), dlab = Up(labels), dd = Up(std::vector<float>(n * c, 7.0f));
  Tensor dstats = Up(std::vector<float>{1.5f, 2.0f}), dpred = Up(std::vector<int32_t>(n, -3));
  ASSERT_TRUE(
      dev_->SoftmaxCrossEntropy(F(dl), ld, n, c, I(dlab), 0.125f, F(dd), F(dstats), I(dpred)).ok());
  EXPECT_TRUE(AllClose(Down<float>(dd), d, kElementwiseTol, 1e-7));
  EXPECT_TRUE(AllClose(Down<float>(dstats), stats, kReductionTol, 0.0));
  EXPECT_EQ(Down<int32_t>(dpred), pred);
}

TEST_P(KernelsEquivalenceTest, ColumnSumAndDot) {
  for (auto [m, w] : {std::pair<int64_t, int64_t>{3000, 70}, {17, 300}}) {
    const int64_t ld = w + 2;
    const std::vector<float> x = RandomFloats(m * ld, 22), y = RandomFloats(m * ld, 23);
    const std::vector<float> dst0 = RandomFloats(w, 24);
    std::vector<float> sum = dst0, dot = dst0;
    std::vector<double> scale_sum(dst0.begin(), dst0.end()), scale_dot(w);
    for (int64_t c = 0; c < w; ++c) {
      scale_sum[c] = scale_dot[c] = std::fabs(dst0[c]);
      for (int64_t r = 0; r < m; ++r) {
        scale_sum[c] += std::fabs(0.5 * x[r * ld + c]);
        scale_dot[c] += std::fabs(static_cast<double>(x[r * ld + c]) * y[r * ld + c]);
      }
    }
    ASSERT_TRUE(cpu_->ColumnSum(x.data(), ld, m, w, 0.5f, sum.data()).ok());
    ASSERT_TRUE(cpu_->ColumnDot(x.data(), ld, y.data(), ld, m, w, dot.data()).ok());
    Tensor dx = Up(x), dy = Up(y), dsum = Up(dst0), ddot = Up(dst0);
    ASSERT_TRUE(dev_->ColumnSum(F(dx), ld, m, w, 0.5f, F(dsum)).ok());
    ASSERT_TRUE(dev_->ColumnDot(F(dx), ld, F(dy), ld, m, w, F(ddot)).ok());
    // m terms, alpha's rounding and dst's add, each device in its own order: within twice the
    // bound of m + 2 terms of each other, relative to Σ|terms| (the sums cancel to near zero).
    const double tol = 2 * testing::SumErrorBound(m + 2);
    const std::vector<double> got_sum(sum.begin(), sum.end()), got_dot(dot.begin(), dot.end());
    EXPECT_TRUE(AllClose(Down<float>(dsum), got_sum, tol, 0.0, &scale_sum)) << m << "x" << w;
    EXPECT_TRUE(AllClose(Down<float>(ddot), got_dot, tol, 0.0, &scale_dot)) << m << "x" << w;
  }
}

TEST_P(KernelsEquivalenceTest, Fill) {
  Tensor d = Up(RandomFloats(100003, 25));
  ASSERT_TRUE(dev_->Fill(F(d), 100000, -1.25f).ok());
  const std::vector<float> got = Down<float>(d);
  for (int64_t i = 0; i < 100000; ++i) ASSERT_EQ(got[i], -1.25f) << i;
  EXPECT_NE(got[100000], -1.25f);
}

std::string DeviceName(const ::testing::TestParamInfo<core::Device>& info) {
  std::string name = info.param.DebugString();
  name.erase(std::remove(name.begin(), name.end(), ':'), name.end());
  return name;
}

INSTANTIATE_TEST_SUITE_P(Devices, KernelsEquivalenceTest, ::testing::Values(core::Device::Cuda(0)),
                         DeviceName);

}  // namespace
}  // namespace cavs::ops

namespace cavs::core {
// Test names and failure messages show "cuda:0" instead of the value's bytes.
void PrintTo(const Device& device, std::ostream* os) { *os << device.DebugString(); }
}  // namespace cavs::core
