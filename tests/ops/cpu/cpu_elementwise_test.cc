// CpuKernels::Elementwise and Fill against naive per-element references: every EwOp, odd and
// broadcast (ld = 0) operands, in-place programs, Sum/Broadcast widths, dropout masks drawn
// from core::PhiloxUniform, and the accuracy of the vectorized exp/tanh/sigmoid.
#include "ops/cpu/cpu_elementwise.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/random.h"
#include "gtest/gtest.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/cpu_math.h"
#include "tests/ops/ops_test_util.h"

namespace cavs::ops::cpu {
namespace {

using testing::AllClose;
using testing::RandomFloats;

constexpr int64_t kRows = 7;
constexpr int64_t kWidth = 13;
constexpr int64_t kLd = 17;  // odd row stride, wider than the rows

// A [kRows, kLd] buffer of random values in [-3, 3).
std::vector<float> Operand(uint32_t seed) {
  return RandomFloats(static_cast<size_t>(kRows * kLd), seed, -3.0f, 3.0f);
}

// The naive value of a one-input or two-input op.
double Naive(EwOp op, double a, double b, double dst, const EwInstr& in) {
  switch (op) {
    case EwOp::kCopy:
      return a;
    case EwOp::kZero:
      return 0.0;
    case EwOp::kAdd:
      return a + b;
    case EwOp::kSub:
      return a - b;
    case EwOp::kMul:
      return a * b;
    case EwOp::kAccumulate:
      return dst + a;
    case EwOp::kSigmoid:
      return 1.0 / (1.0 + std::exp(-a));
    case EwOp::kTanh:
      return std::tanh(a);
    case EwOp::kRelu:
      return a > 0 ? a : 0.0;
    case EwOp::kNeg:
      return -a;
    case EwOp::kScale:
      return in.scalar * a + in.offset;
    case EwOp::kSigmoidGrad:
      return b * a * (1.0 - a);
    case EwOp::kTanhGrad:
      return b * (1.0 - a * a);
    case EwOp::kReluGrad:
      return a > 0 ? b : 0.0;
    default:
      ADD_FAILURE() << "no naive value for op " << static_cast<int>(op);
      return 0.0;
  }
}

const EwOp kMapOps[] = {EwOp::kCopy,     EwOp::kZero,       EwOp::kAdd,     EwOp::kSub,
                        EwOp::kMul,      EwOp::kAccumulate, EwOp::kSigmoid, EwOp::kTanh,
                        EwOp::kRelu,     EwOp::kNeg,        EwOp::kScale,   EwOp::kSigmoidGrad,
                        EwOp::kTanhGrad, EwOp::kReluGrad};

// Runs one instruction of `op` with the given operand strides and checks every element
// (including that the padding columns and unused rows are untouched).
void CheckMapOp(EwOp op, int64_t a_ld, int64_t b_ld) {
  std::vector<float> a = Operand(1), b = Operand(2), dst = Operand(3);
  const std::vector<float> dst_before = dst;
  EwInstr in;
  in.op = op;
  in.width = kWidth;
  in.dst = {dst.data(), kLd};
  in.a = {a.data(), a_ld};
  in.b = {b.data(), b_ld};
  in.scalar = 0.75f;
  in.offset = -0.25f;
  ASSERT_TRUE(CpuKernels::Get()->Elementwise(&in, &in, 1, kRows).ok());
  std::vector<double> want(dst_before.begin(), dst_before.end());
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kWidth; ++c) {
      want[r * kLd + c] = Naive(op, a[r * a_ld + c], b[r * b_ld + c], dst_before[r * kLd + c], in);
    }
  }
  EXPECT_TRUE(AllClose(dst, want, 1e-6, 1e-7))
      << "op " << static_cast<int>(op) << " a_ld " << a_ld << " b_ld " << b_ld;
}

TEST(CpuElementwiseTest, EveryOpMatchesNaive) {
  for (EwOp op : kMapOps) CheckMapOp(op, kLd, kLd);
}

TEST(CpuElementwiseTest, BroadcastOperandsWithLdZero) {
  for (EwOp op : kMapOps) {
    CheckMapOp(op, 0, kLd);
    CheckMapOp(op, kLd, 0);
    CheckMapOp(op, 0, 0);
  }
}

TEST(CpuElementwiseTest, InPlaceDstEqualsOperand) {
  for (EwOp op : kMapOps) {
    for (bool into_b : {false, true}) {
      std::vector<float> a = Operand(4), b = Operand(5);
      const std::vector<float> a0 = a, b0 = b;
      std::vector<float>& dst = into_b ? b : a;
      EwInstr in{op, kWidth, {dst.data(), kLd}, {a.data(), kLd}, {b.data(), kLd}, 2.0f, 1.0f};
      ASSERT_TRUE(CpuKernels::Get()->Elementwise(&in, &in, 1, kRows).ok());
      std::vector<double> want(dst.size());
      const std::vector<float>& dst0 = into_b ? b0 : a0;
      for (size_t i = 0; i < want.size(); ++i) want[i] = dst0[i];
      for (int64_t r = 0; r < kRows; ++r) {
        for (int64_t c = 0; c < kWidth; ++c) {
          const int64_t i = r * kLd + c;
          want[i] = Naive(op, a0[i], b0[i], dst0[i], in);
        }
      }
      EXPECT_TRUE(AllClose(dst, want, 1e-6, 1e-7))
          << "op " << static_cast<int>(op) << (into_b ? " dst == b" : " dst == a");
    }
  }
}

TEST(CpuElementwiseTest, SumAndBroadcastWidths) {
  for (int64_t width : {1, 5, 16, 37, 100}) {
    std::vector<float> a = RandomFloats(static_cast<size_t>(kRows * width), 9);
    std::vector<float> sums(kRows * 2, -7.0f);  // one column used, ld 2
    std::vector<float> out(static_cast<size_t>(kRows * width), -7.0f);
    const EwInstr program[] = {
        {EwOp::kSum, width, {sums.data(), 2}, {a.data(), width}},
        {EwOp::kBroadcast, width, {out.data(), width}, {sums.data(), 2}},
    };
    ASSERT_TRUE(CpuKernels::Get()->Elementwise(program, program, 2, kRows).ok());
    for (int64_t r = 0; r < kRows; ++r) {
      double sum = 0.0;
      for (int64_t c = 0; c < width; ++c) sum += a[r * width + c];
      EXPECT_NEAR(sums[r * 2], sum, 1e-5 * width) << "row " << r << " width " << width;
      EXPECT_EQ(sums[r * 2 + 1], -7.0f);
      for (int64_t c = 0; c < width; ++c) ASSERT_EQ(out[r * width + c], sums[r * 2]);
    }
  }
}

// An LSTM-cell-like chain: instructions see the results of earlier ones within a row.
TEST(CpuElementwiseTest, ProgramRunsInstructionsInOrderPerRow) {
  const int64_t rows = 2000, h = 24;  // above the parallel threshold
  std::vector<float> gates = RandomFloats(static_cast<size_t>(rows * 4 * h), 21, -4.0f, 4.0f);
  std::vector<float> c_prev = RandomFloats(static_cast<size_t>(rows * h), 22);
  std::vector<float> c(rows * h), hid(rows * h), tmp(rows * h);
  float* g = gates.data();
  const int64_t gl = 4 * h;
  const EwInstr program[] = {
      {EwOp::kSigmoid, 3 * h, {g, gl}, {g, gl}},                 // i, f, o in place
      {EwOp::kTanh, h, {g + 3 * h, gl}, {g + 3 * h, gl}},        // u in place
      {EwOp::kMul, h, {c.data(), h}, {g, gl}, {g + 3 * h, gl}},  // c = i * u
      {EwOp::kMul, h, {tmp.data(), h}, {g + h, gl}, {c_prev.data(), h}},
      {EwOp::kAccumulate, h, {c.data(), h}, {tmp.data(), h}},  // c += f * c_prev
      {EwOp::kTanh, h, {tmp.data(), h}, {c.data(), h}},
      {EwOp::kMul, h, {hid.data(), h}, {g + 2 * h, gl}, {tmp.data(), h}},
  };
  const std::vector<float> g0 = gates;
  for (int threads : {1, 2}) {
    SetCpuThreads(threads);
    gates = g0;
    ASSERT_TRUE(CpuKernels::Get()->Elementwise(program, program, 7, rows).ok());
    std::vector<double> want_c(rows * h), want_h(rows * h);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < h; ++j) {
        auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
        const double i = sig(g0[r * gl + j]), f = sig(g0[r * gl + h + j]);
        const double o = sig(g0[r * gl + 2 * h + j]), u = std::tanh(g0[r * gl + 3 * h + j]);
        want_c[r * h + j] = i * u + f * c_prev[r * h + j];
        want_h[r * h + j] = o * std::tanh(want_c[r * h + j]);
      }
    }
    EXPECT_TRUE(AllClose(c, want_c, 1e-5, 1e-6)) << threads << " threads";
    EXPECT_TRUE(AllClose(hid, want_h, 1e-5, 1e-6)) << threads << " threads";
  }
  SetCpuThreads(0);
}

// The LSTM cell program with its temporaries (f * c_prev, tanh c) as scratch operands gives the
// same bits as with them in buffers, for 1 and 2 threads; a device without scratch support
// rejects the program.
TEST(CpuElementwiseTest, ScratchOperandsMatchBuffers) {
  const int64_t rows = 2000, h = 24;
  const std::vector<float> g0 = RandomFloats(static_cast<size_t>(rows * 4 * h), 41, -4.0f, 4.0f);
  std::vector<float> c_prev = RandomFloats(static_cast<size_t>(rows * h), 42);
  const int64_t gl = 4 * h;
  auto run = [&](bool scratch, std::vector<float>& c, std::vector<float>& hid) {
    std::vector<float> gates = g0, tmp(rows * h), tmp2(rows * h);
    float* g = gates.data();
    const EwArg t1 = scratch ? EwArg{nullptr, 0, 0} : EwArg{tmp.data(), h};
    const EwArg t2 = scratch ? EwArg{nullptr, 0, 32} : EwArg{tmp2.data(), h};
    const EwInstr program[] = {
        {EwOp::kSigmoid, 3 * h, {g, gl}, {g, gl}},
        {EwOp::kTanh, h, {g + 3 * h, gl}, {g + 3 * h, gl}},
        {EwOp::kMul, h, {c.data(), h}, {g, gl}, {g + 3 * h, gl}},
        {EwOp::kMul, h, t1, {g + h, gl}, {c_prev.data(), h}},
        {EwOp::kAccumulate, h, {c.data(), h}, t1},
        {EwOp::kTanh, h, t2, {c.data(), h}},
        {EwOp::kMul, h, {hid.data(), h}, {g + 2 * h, gl}, t2},
    };
    return CpuKernels::Get()->Elementwise(program, program, 7, rows);
  };
  std::vector<float> c_buf(rows * h), h_buf(rows * h);
  ASSERT_TRUE(run(false, c_buf, h_buf).ok());
  for (int threads : {1, 2}) {
    SetCpuThreads(threads);
    std::vector<float> c(rows * h), hid(rows * h);
    ASSERT_TRUE(run(true, c, hid).ok());
    EXPECT_EQ(c, c_buf) << threads << " threads";
    EXPECT_EQ(hid, h_buf) << threads << " threads";
  }
  SetCpuThreads(0);
  std::vector<float> out(8);
  const EwInstr uses_scratch[] = {{EwOp::kTanh, 8, {nullptr, 0, 0}, {out.data(), 8}},
                                  {EwOp::kCopy, 8, {out.data(), 8}, {nullptr, 0, 0}}};
  EXPECT_TRUE(cpu::ValidateProgram(uses_scratch, 2, 1).ok());
  const absl::Status s = cpu::ValidateProgram(uses_scratch, 2, 1, /*allow_scratch=*/false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("scratch"), std::string::npos) << s;
}

TEST(CpuElementwiseTest, ResultsDoNotDependOnThreadCount) {
  const int64_t rows = 3000, w = 33;
  const std::vector<float> a = RandomFloats(static_cast<size_t>(rows * w), 31, -5.0f, 5.0f);
  std::vector<float> out1(rows * w), out2(rows * w);
  for (int threads : {1, 2}) {
    std::vector<float>& out = threads == 1 ? out1 : out2;
    SetCpuThreads(threads);
    EwInstr in{EwOp::kTanh, w, {out.data(), w}, {const_cast<float*>(a.data()), w}};
    ASSERT_TRUE(CpuKernels::Get()->Elementwise(&in, &in, 1, rows).ok());
  }
  SetCpuThreads(0);
  EXPECT_EQ(out1, out2);
}

// The vectorized math against libm in double precision, over a dense sweep of each range.
TEST(CpuMathTest, ExpTanhSigmoidWithinOneMicroRelative) {
  double worst_exp = 0, worst_tanh = 0, worst_sigmoid = 0;
  for (double x = -103.0; x <= 88.7; x += 0.000731) {
    const float xf = static_cast<float>(x);
    const double e = std::exp(static_cast<double>(xf));
    if (e >= std::numeric_limits<float>::min()) {  // normal results
      worst_exp = std::max(worst_exp, std::fabs(cpu::Exp(xf) - e) / e);
    }
    const double t = std::tanh(static_cast<double>(xf));
    if (t != 0.0) worst_tanh = std::max(worst_tanh, std::fabs(cpu::Tanh(xf) - t) / std::fabs(t));
    const double s = 1.0 / (1.0 + std::exp(-static_cast<double>(xf)));
    if (s >= std::numeric_limits<float>::min()) {
      worst_sigmoid = std::max(worst_sigmoid, std::fabs(cpu::Sigmoid(xf) - s) / s);
    }
  }
  for (float x = 1e-30f; x < 1.0f; x *= 1.01f) {  // tiny arguments, both signs
    for (float xs : {x, -x}) {
      const double t = std::tanh(static_cast<double>(xs));
      worst_tanh = std::max(worst_tanh, std::fabs(cpu::Tanh(xs) - t) / std::fabs(t));
    }
  }
  EXPECT_LT(worst_exp, 1e-6);
  EXPECT_LT(worst_tanh, 1e-6);
  EXPECT_LT(worst_sigmoid, 1e-6);
  RecordProperty("worst_exp_rel_err", ::testing::PrintToString(worst_exp));
  RecordProperty("worst_tanh_rel_err", ::testing::PrintToString(worst_tanh));
}

TEST(CpuMathTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(cpu::Exp(0.0f), 1.0f);
  EXPECT_EQ(cpu::Exp(100.0f), inf);
  EXPECT_EQ(cpu::Exp(-200.0f), 0.0f);
  EXPECT_EQ(cpu::Exp(-inf), 0.0f);
  EXPECT_EQ(cpu::Tanh(0.0f), 0.0f);
  EXPECT_EQ(cpu::Tanh(50.0f), 1.0f);
  EXPECT_EQ(cpu::Tanh(-inf), -1.0f);
  EXPECT_EQ(cpu::Sigmoid(0.0f), 0.5f);
  EXPECT_EQ(cpu::Sigmoid(inf), 1.0f);
  EXPECT_EQ(cpu::Sigmoid(-inf), 0.0f);
  EXPECT_NEAR(cpu::Sigmoid(-100.0f), std::exp(-100.0), 1e-45);  // subnormal, no overflow
  EXPECT_TRUE(std::isnan(cpu::Tanh(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(cpu::Sigmoid(std::numeric_limits<float>::quiet_NaN())));
}

TEST(CpuFillTest, FillsExactlyN) {
  std::vector<float> v(100000, 1.0f);
  ASSERT_TRUE(CpuKernels::Get()->Fill(v.data(), 99999, -2.5f).ok());
  for (size_t i = 0; i < 99999; ++i) ASSERT_EQ(v[i], -2.5f) << i;
  EXPECT_EQ(v[99999], 1.0f);
  EXPECT_TRUE(CpuKernels::Get()->Fill(nullptr, 0, 1.0f).ok());
  EXPECT_FALSE(CpuKernels::Get()->Fill(nullptr, 3, 1.0f).ok());
}

TEST(CpuElementwiseTest, RejectsMalformedPrograms) {
  std::vector<float> a(64), d(64);
  Kernels* k = CpuKernels::Get();
  auto run = [&](EwInstr in, int64_t rows) { return k->Elementwise(&in, &in, 1, rows).code(); };
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(run({EwOp::kAdd, 4, {d.data(), 4}, {a.data(), 4}, {nullptr, 4}}, 2), kBad);
  EXPECT_EQ(run({EwOp::kCopy, 4, {d.data(), 0}, {a.data(), 4}}, 2), kBad);  // rows collide
  EXPECT_EQ(run({EwOp::kCopy, 4, {d.data(), 3}, {a.data(), 4}}, 2), kBad);  // rows overlap
  EXPECT_EQ(run({EwOp::kCopy, -1, {d.data(), 4}, {a.data(), 4}}, 2), kBad);
  EXPECT_EQ(run({static_cast<EwOp>(200), 4, {d.data(), 4}, {a.data(), 4}}, 2), kBad);
  EXPECT_EQ(run({EwOp::kDropout, 4, {d.data(), 4}, {a.data(), 4}}, 2), kBad);  // no uids
  EXPECT_EQ(k->Elementwise(nullptr, nullptr, 1, 2).code(), kBad);
  // A one-row program may write a broadcast destination; an empty one needs nothing.
  EXPECT_TRUE(run({EwOp::kCopy, 4, {d.data(), 0}, {a.data(), 4}}, 1) == absl::StatusCode::kOk);
  EXPECT_TRUE(run({EwOp::kAdd, 4, {nullptr, 0}, {nullptr, 0}, {nullptr, 0}}, 0) ==
              absl::StatusCode::kOk);
}

// A program written for row 0 run with a row offset gives the bits of its RebaseEwProgram copy
// run without one: plain, broadcast (ld 0), scratch, row-mapped (push and pull) operands and
// dropout uids, rows split over threads or not, and with the offset off it is refused.
TEST(CpuElementwiseTest, RowOffsetRunsTheRebasedProgram) {
  constexpr int64_t kAll = 40, kW = 5;
  std::vector<float> x = RandomFloats(kAll * kW, 7, -2.0f, 2.0f);
  std::vector<float> bias = RandomFloats(kW, 8, -1.0f, 1.0f);
  std::vector<int32_t> parent(kAll), uids(kAll);
  for (int64_t r = 0; r < kAll; ++r) {
    parent[r] = r % 3 == 0 ? -1 : static_cast<int32_t>((r * 7) % kAll);
    uids[r] = static_cast<int32_t>(100 + r);
  }
  auto program = [&](std::vector<float>& y, std::vector<float>& pushed, std::vector<float>& acc) {
    std::vector<EwInstr> p(5);
    p[0] = {EwOp::kAdd, kW, {nullptr, 0, 0}, {x.data(), kW}, {bias.data(), 0}};  // scratch
    p[1] = {EwOp::kTanh, kW, {y.data(), kW}, {nullptr, 0, 0}};
    p[2] = {EwOp::kDropout, kW, {y.data(), kW}, {y.data(), kW}};
    p[2].scalar = 0.3f;
    p[2].seed = 99;
    p[2].uids = uids.data();
    p[3] = {EwOp::kCopy, kW, {pushed.data(), kW, -1, parent.data()}, {y.data(), kW}};
    p[4] = {EwOp::kAccumulate, kW, {acc.data(), kW}, {y.data(), kW, -1, parent.data()}};
    return p;
  };
  const KernelOptions before = GetKernelOptions();
  for (const int threads : {1, 2}) {
    SetCpuThreads(threads);
    for (const auto& [row0, rows] : {std::pair<int64_t, int64_t>{0, 9}, {7, 1}, {13, 27}}) {
      std::vector<float> y1(kAll * kW, 0.5f), pushed1(kAll * kW, 0.25f), acc1(kAll * kW, 1.0f);
      std::vector<float> y2 = y1, pushed2 = pushed1, acc2 = acc1;
      std::vector<EwInstr> p1 = program(y1, pushed1, acc1), p2 = program(y2, pushed2, acc2);
      const int count = static_cast<int>(p1.size());
      ASSERT_TRUE(CpuKernels::Get()->Elementwise(p1.data(), p1.data(), count, rows, 0, row0).ok());
      RebaseEwProgram(p2.data(), count, row0, p2.data());
      ASSERT_TRUE(CpuKernels::Get()->Elementwise(p2.data(), p2.data(), count, rows).ok());
      EXPECT_EQ(y1, y2) << "row0 " << row0 << " threads " << threads;
      EXPECT_EQ(pushed1, pushed2);
      EXPECT_EQ(acc1, acc2);
      // Only rows [row0, row0 + rows) of y were written.
      for (int64_t r = 0; r < kAll; ++r) {
        if (r >= row0 && r < row0 + rows) continue;
        for (int64_t c = 0; c < kW; ++c) ASSERT_EQ(y1[r * kW + c], 0.5f) << r;
      }
    }
  }
  KernelOptions off = before;
  off.cpu.ew_row_offset = false;
  ASSERT_TRUE(SetKernelOptions(off).ok());
  EXPECT_FALSE(CpuKernels::Get()->ElementwiseRowOffset());
  std::vector<float> y(kAll * kW), pushed(kAll * kW), acc(kAll * kW);
  std::vector<EwInstr> p = program(y, pushed, acc);
  EXPECT_EQ(CpuKernels::Get()->Elementwise(p.data(), p.data(), 2, 3, 0, 4).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(SetKernelOptions(before).ok());
  EXPECT_EQ(CpuKernels::Get()->ElementwiseRowOffset(), before.cpu.ew_row_offset);
}

}  // namespace
}  // namespace cavs::ops::cpu
