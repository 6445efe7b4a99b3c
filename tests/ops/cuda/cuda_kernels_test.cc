// The CUDA kernels against the CPU kernels on the shapes that select their different code paths
// (vectorized and scalar rows, atomics, warp- and block-per-row softmax, programs in shared and
// global memory, many row chunks), and the dropout mask bit for bit. The op-by-op suite over
// every device is kernels_equivalence_test.cc; this file covers what is CUDA-specific.
#include "ops/cuda/cuda_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "ops/cuda/column_reduce.h"
#include "ops/cuda/cuda_gemm.h"
#include "ops/cuda/cuda_small_gemm.h"
#include "ops/cuda/small_gemm.h"
#include "ops/kernels.h"
#include "tests/ops/cuda/cuda_test_util.h"
#include "tests/ops/ops_test_util.h"

namespace cavs::ops::cuda {
namespace {

using testing::AllClose;
using testing::DeviceArray;
using testing::RandomFloats;
using testing::RandomInts;

class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAVS_SKIP_WITHOUT_CUDA();
    absl::StatusOr<Kernels*> cuda = GetKernels(core::Device::Cuda(0));
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    cuda_ = *cuda;
    absl::StatusOr<Kernels*> cpu = GetKernels(core::Device::Cpu());
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = *cpu;
  }

  // Runs `program` (pointers into host buffers) on the CPU as it is, and on the GPU with each
  // pointer moved to the same offset of a device copy of its buffer, both over `rows` rows from
  // `row0` (Kernels::Elementwise's row offset); returns both results.
  void CompareProgram(std::vector<EwInstr> program, std::vector<std::vector<float>*> buffers,
                      const std::vector<int32_t>& uids, int64_t rows, double rtol,
                      int64_t row0 = 0) {
    std::vector<std::unique_ptr<DeviceArray<float>>> dev;
    for (auto* b : buffers) dev.push_back(std::make_unique<DeviceArray<float>>(*b));
    DeviceArray<int32_t> dev_uids(uids.empty() ? std::vector<int32_t>{0} : uids);
    std::vector<EwInstr> device_program = program;
    auto move = [&](EwArg& arg) {
      for (size_t i = 0; i < buffers.size(); ++i) {
        float* base = buffers[i]->data();
        if (arg.ptr >= base && arg.ptr < base + buffers[i]->size()) {
          arg.ptr = dev[i]->get() + (arg.ptr - base);
          return;
        }
      }
      ASSERT_EQ(arg.ptr, nullptr);
    };
    for (EwInstr& in : device_program) {
      move(in.dst);
      move(in.a);
      move(in.b);
      if (in.uids != nullptr) in.uids = dev_uids.get();
    }
    DeviceArray<EwInstr> dev_program(device_program);
    const int count = static_cast<int>(program.size());
    ASSERT_TRUE(
        cuda_->Elementwise(device_program.data(), dev_program.get(), count, rows, 0, row0).ok());
    ASSERT_TRUE(cpu_->Elementwise(program.data(), program.data(), count, rows, 0, row0).ok());
    for (size_t i = 0; i < buffers.size(); ++i) {
      EXPECT_TRUE(AllClose(dev[i]->Download(), *buffers[i], rtol, 1e-5)) << "buffer " << i;
    }
  }

  // C = alpha op(A) op(B) + beta C on the GPU from `c_gpu` and on the CPU from `c_cpu` (the
  // same values, but where the GPU must not read C), each operand `offset` floats into its
  // buffer; compares the two C's. The GPU's GEMM is Kernels::Gemm.
  ::testing::AssertionResult GemmMatches(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                         float alpha, const std::vector<float>& a, int64_t lda,
                                         const std::vector<float>& b, int64_t ldb, float beta,
                                         const std::vector<float>& c_gpu, std::vector<float> c_cpu,
                                         int64_t ldc, int64_t offset,
                                         const std::vector<float>& bias = {},
                                         int64_t bias_offset = 0) {
    DeviceArray<float> da(a), db(b), dc(c_gpu);
    // With a bias (bias_offset floats into `bias`): Kernels::GemmBias, on both devices.
    std::optional<DeviceArray<float>> dbias;
    if (!bias.empty()) dbias.emplace(bias);
    const float* gpu_bias = dbias.has_value() ? dbias->get() + bias_offset : nullptr;
    const float* cpu_bias = dbias.has_value() ? bias.data() + bias_offset : nullptr;
    absl::Status s = cuda_->Gemm(Kernels::GemmCall{ta, tb, m, n, k, alpha, da.get() + offset, lda,
                                                   db.get() + offset, ldb, beta, dc.get() + offset,
                                                   ldc, gpu_bias});
    if (!s.ok()) return ::testing::AssertionFailure() << "GPU Gemm: " << s;
    const Kernels::GemmCall on_cpu{ta,
                                   tb,
                                   m,
                                   n,
                                   k,
                                   alpha,
                                   a.data() + offset,
                                   lda,
                                   b.data() + offset,
                                   ldb,
                                   beta,
                                   c_cpu.data() + offset,
                                   ldc,
                                   cpu_bias};
    // Each device's C is within GemmErrorBound(k) of the exact product, relative to the terms'
    // magnitudes, in whatever order it sums (tiles, slices of k): twice that between them. The
    // floats around C (the offset, the padding of its rows) must be untouched: scale 0.
    std::vector<double> scale(c_cpu.size(), 0.0);
    const std::vector<double> c_scale = testing::GemmScale(on_cpu);
    std::copy(c_scale.begin(), c_scale.end(), scale.begin() + offset);
    s = cpu_->Gemm(on_cpu);
    if (!s.ok()) return ::testing::AssertionFailure() << "CPU Gemm: " << s;
    return AllClose(dc.Download(), std::vector<double>(c_cpu.begin(), c_cpu.end()),
                    2 * testing::GemmErrorBound(k), 0.0, &scale);
  }

  Kernels* cuda_ = nullptr;
  Kernels* cpu_ = nullptr;
};

TEST_F(CudaKernelsTest, DropoutMaskIsTheCpuMask) {
  const int64_t rows = 300, w = 257;
  std::vector<float> x = RandomFloats(rows * w, 1, 0.5f, 1.5f), y(rows * w, 7.0f);
  std::vector<int32_t> uids = RandomInts(rows, 2, 0, 1 << 20);
  EwInstr in;
  in.op = EwOp::kDropout;
  in.width = w;
  in.dst = {y.data(), w};
  in.a = {x.data(), w};
  in.scalar = 0.3f;
  in.seed = 0x1234567890abcdefull;
  in.uids = uids.data();
  DeviceArray<float> dx(x), dy(y.size());
  DeviceArray<int32_t> duids(uids);
  EwInstr dev = in;
  dev.dst.ptr = dy.get();
  dev.a.ptr = dx.get();
  dev.uids = duids.get();
  DeviceArray<EwInstr> program(std::vector<EwInstr>{dev});
  ASSERT_TRUE(cuda_->Elementwise(&dev, program.get(), 1, rows).ok());
  ASSERT_TRUE(cpu_->Elementwise(&in, &in, 1, rows).ok());
  const std::vector<float> got = dy.Download();
  int64_t dropped = 0;
  for (int64_t i = 0; i < rows * w; ++i) {
    ASSERT_EQ(got[i] == 0.0f, y[i] == 0.0f) << "element " << i;
    dropped += y[i] == 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / (rows * w), 0.3, 0.01);
  EXPECT_TRUE(AllClose(got, y, 1e-6, 0.0));
}

// An LSTM-like program with cross-column reads (sum, broadcast, copies at column offsets) over
// many rows, once from shared memory and once long enough to be read from global memory, over
// all rows and from a row offset (KernelOptions::cuda.ew_row_offset on). Both CUDA paths: the
// generated kernels (cuda_fused.h) and the interpreter.
TEST_F(CudaKernelsTest, ElementwiseProgramsMatchTheCpu) {
  auto* cuda = static_cast<CudaKernels*>(cuda_);
  const bool was_fused = cuda->fused_elementwise();
  const KernelOptions before = GetKernelOptions();
  KernelOptions offsets = before;
  offsets.cpu.ew_row_offset = offsets.cuda.ew_row_offset = true;
  ASSERT_TRUE(SetKernelOptions(offsets).ok());
  for (int run : {1, 8, -1, -8}) {  // negative: the interpreter
    ASSERT_TRUE(cuda->SetFusedElementwise(run > 0).ok());
    const int repeats = run > 0 ? run : -run;
    const int64_t rows = 5000, h = 37, ld = 6 * h;
    std::vector<float> g = RandomFloats(rows * ld, 3), s(rows * 2 * h, 0.0f);
    std::vector<float> bias = RandomFloats(h, 4);  // read with ld 0 by every row
    std::vector<EwInstr> p;
    auto op = [&](EwOp o, int64_t width, EwArg d, EwArg a, EwArg b = {}) {
      EwInstr in;
      in.op = o;
      in.width = width;
      in.dst = d;
      in.a = a;
      in.b = b;
      in.scalar = 0.5f;
      in.offset = 0.25f;
      p.push_back(in);
    };
    float* G = g.data();
    float* S = s.data();
    for (int r = 0; r < repeats; ++r) {
      op(EwOp::kSigmoid, 3 * h, {G, ld}, {G, ld});
      op(EwOp::kTanh, h, {G + 3 * h, ld}, {G + 3 * h, ld});
      op(EwOp::kMul, h, {S, 2 * h}, {G, ld}, {G + 3 * h, ld});
      op(EwOp::kAccumulate, h, {S, 2 * h}, {G + 4 * h, ld});
      op(EwOp::kTanhGrad, h, {S + h, 2 * h}, {S, 2 * h}, {G + h, ld});
      op(EwOp::kSum, h, {G + 5 * h, ld}, {S + h, 2 * h});
      op(EwOp::kBroadcast, h, {G + 4 * h, ld}, {G + 5 * h, ld});
      op(EwOp::kScale, 2 * h, {S, 2 * h}, {S, 2 * h});
      op(EwOp::kSigmoidGrad, h, {G + h, ld}, {G, ld}, {S, 2 * h});
      op(EwOp::kReluGrad, h, {G + 2 * h, ld}, {G + 3 * h, ld}, {S + h, 2 * h});
      op(EwOp::kRelu, h, {G + 3 * h, ld}, {S + h, 2 * h});
      op(EwOp::kSub, h, {S + h, 2 * h}, {G + 4 * h, ld}, {bias.data(), 0});
      op(EwOp::kNeg, h, {G + 2 * h, ld}, {G + 2 * h, ld});
      op(EwOp::kAdd, h, {S, 2 * h}, {S, 2 * h}, {G + 2 * h, ld});
      op(EwOp::kCopy, h, {G + 5 * h, ld}, {S, 2 * h});
    }
    op(EwOp::kZero, h, {G, ld}, {});
    CompareProgram(p, {&g, &s, &bias}, {}, rows, 1e-4);
    CompareProgram(p, {&g, &s, &bias}, {}, rows - 1234, 1e-4, 1234);
  }
  ASSERT_TRUE(SetKernelOptions(before).ok());
  ASSERT_TRUE(cuda->SetFusedElementwise(was_fused).ok());
}

TEST_F(CudaKernelsTest, GatherAndScatterMatchTheCpu) {
  for (int64_t w : {6, 8, 300}) {  // scalar, float4 and wide rows
    const int64_t n = 500, m = 3000;
    std::vector<float> src = RandomFloats(n * w, 4), out(m * w, 0.0f);
    std::vector<int32_t> idx = RandomInts(m, 5, -1, n - 1);  // repeats and holes
    DeviceArray<float> dsrc(src), dout(out);
    DeviceArray<int32_t> didx(idx);
    ASSERT_TRUE(cuda_->GatherRows(dsrc.get(), w, didx.get(), m, w, dout.get(), w).ok());
    ASSERT_TRUE(cpu_->GatherRows(src.data(), w, idx.data(), m, w, out.data(), w).ok());
    EXPECT_EQ(dout.Download(), out) << "w=" << w;
    // Scatter the gathered rows back: repeated indices need atomics.
    std::vector<float> acc = RandomFloats(n * w, 6);
    DeviceArray<float> dacc(acc);
    ASSERT_TRUE(cuda_->ScatterAddRows(dout.get(), w, didx.get(), m, w, dacc.get(), w, false).ok());
    ASSERT_TRUE(cpu_->ScatterAddRows(out.data(), w, idx.data(), m, w, acc.data(), w, false).ok());
    EXPECT_TRUE(AllClose(dacc.Download(), acc, 1e-5, 1e-5)) << "w=" << w;
    // Unique indices: a permutation of the first n rows.
    std::vector<int32_t> perm(n);
    for (int32_t i = 0; i < n; ++i) perm[i] = (i * 7919) % n;
    DeviceArray<int32_t> dperm(perm);
    ASSERT_TRUE(cuda_->ScatterAddRows(dsrc.get(), w, dperm.get(), n, w, dacc.get(), w, true).ok());
    ASSERT_TRUE(cpu_->ScatterAddRows(src.data(), w, perm.data(), n, w, acc.data(), w, true).ok());
    EXPECT_TRUE(AllClose(dacc.Download(), acc, 1e-5, 1e-5)) << "w=" << w;
  }
}

TEST_F(CudaKernelsTest, SegmentReductionsMatchTheCpu) {
  const int64_t n = 400, m = 700, w = 33;
  std::vector<int32_t> lengths = RandomInts(m, 7, 0, 4), offsets(m + 1, 0);
  for (int64_t i = 0; i < m; ++i) offsets[i + 1] = offsets[i] + lengths[i];
  std::vector<int32_t> ids = RandomInts(offsets[m], 8, 0, n - 1);
  std::vector<float> src = RandomFloats(n * w, 9);
  DeviceArray<float> dsrc(src);
  DeviceArray<int32_t> doff(offsets), dids(ids);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
    std::vector<float> out(m * w, 0.0f), dsrc_cpu(n * w, 0.0f);
    std::vector<int32_t> argmax(m * w, 5);
    DeviceArray<float> dout(out.size()), dgrad(dsrc_cpu);
    DeviceArray<int32_t> dargmax(argmax);
    ASSERT_TRUE(cuda_
                    ->SegmentReduce(op, dsrc.get(), w, doff.get(), dids.get(), m, w, dout.get(), w,
                                    dargmax.get())
                    .ok());
    ASSERT_TRUE(cpu_->SegmentReduce(op, src.data(), w, offsets.data(), ids.data(), m, w, out.data(),
                                    w, argmax.data())
                    .ok());
    EXPECT_TRUE(AllClose(dout.Download(), out, 1e-5, 1e-6)) << static_cast<int>(op);
    if (op == ReduceOp::kMax) EXPECT_EQ(dargmax.Download(), argmax);
    // The gradient of the reduction, with dy = out.
    ASSERT_TRUE(cuda_
                    ->SegmentReduceGrad(op, dout.get(), w, doff.get(), dids.get(), dargmax.get(), m,
                                        w, dgrad.get(), w)
                    .ok());
    ASSERT_TRUE(cpu_->SegmentReduceGrad(op, out.data(), w, offsets.data(), ids.data(),
                                        argmax.data(), m, w, dsrc_cpu.data(), w)
                    .ok());
    EXPECT_TRUE(AllClose(dgrad.Download(), dsrc_cpu, 1e-5, 1e-5)) << static_cast<int>(op);
  }
}

// Long segments (an embedding's gradient of a frequent token: hundreds of rows) and rows wider
// than a block's 256 threads, against a float64 sum: each element within the bound of any
// summation order, 2 len 2^-24 sum |terms|; twice, with the same bits.
TEST_F(CudaKernelsTest, LongSegmentsAndWideRowsSumWithinTheBound) {
  for (const int64_t w : {300, 1100}) {
    const int64_t n = 600, m = 40;
    std::vector<int32_t> lengths = RandomInts(m, 12, 0, 300), offsets(m + 1, 0);
    lengths[0] = 0;
    lengths[1] = 17;
    lengths[2] = 300;
    for (int64_t i = 0; i < m; ++i) offsets[i + 1] = offsets[i] + lengths[i];
    std::vector<int32_t> ids = RandomInts(offsets[m], 13, 0, n - 1);
    std::vector<float> src = RandomFloats(n * w, 14, -1.0f, 1.0f);
    const int64_t ld = w + 5;
    std::vector<float> src_ld(n * ld, std::nanf(""));
    for (int64_t r = 0; r < n; ++r) std::copy_n(&src[r * w], w, &src_ld[r * ld]);
    DeviceArray<float> dsrc(src_ld);
    DeviceArray<int32_t> doff(offsets), dids(ids);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        DeviceArray<float> dout(std::vector<float>(m * w, std::nanf("")));
        ASSERT_TRUE(cuda_
                        ->SegmentReduce(op, dsrc.get(), ld, doff.get(), dids.get(), m, w,
                                        dout.get(), w, nullptr)
                        .ok());
        std::vector<float> out = dout.Download();
        if (run == 1) {
          EXPECT_EQ(out, first) << "w=" << w << " op=" << static_cast<int>(op);
          break;
        }
        first = out;
        for (int64_t i = 0; i < m; ++i) {
          const int64_t len = offsets[i + 1] - offsets[i];
          for (int64_t c = 0; c < w; ++c) {
            double sum = 0, abs_sum = 0;
            for (int32_t j = offsets[i]; j < offsets[i + 1]; ++j) {
              sum += src[ids[j] * w + c];
              abs_sum += std::fabs(src[ids[j] * w + c]);
            }
            double bound = 2.0 * static_cast<double>(len) * std::ldexp(1.0, -24) * abs_sum;
            if (op == ReduceOp::kMean && len > 0) {
              sum /= static_cast<double>(len);
              bound = bound / static_cast<double>(len) + std::ldexp(1.0, -24) * std::fabs(sum);
            }
            ASSERT_LE(std::fabs(out[i * w + c] - sum), bound)
                << "w=" << w << " op=" << static_cast<int>(op) << " row " << i << " (" << len
                << " rows) column " << c;
          }
        }
      }
    }
  }
}

// Against the CPU, a warp per row and a block per row, over one block and many; the statistics
// have the same bits every time (the blocks meet in a workspace, not through atomic adds).
TEST_F(CudaKernelsTest, SoftmaxCrossEntropyMatchesTheCpu) {
  struct Case {
    int64_t c, n;
  };
  for (const Case& k : {Case{5, 777}, Case{1000, 777}, Case{3000, 777}, Case{5, 6}, Case{5, 20000},
                        Case{3000, 1}}) {
    const int64_t c = k.c, n = k.n, ld = c + 3;
    std::vector<float> logits = RandomFloats(n * ld, 10, -4.0f, 4.0f);
    std::vector<int32_t> labels = RandomInts(n, 11, -1, c - 1);
    std::vector<float> dl(n * c, 9.0f), stats = {1.0f, 2.0f};
    std::vector<int32_t> pred(n, -5);
    DeviceArray<float> dlogits(logits), ddl(dl), dstats(stats);
    DeviceArray<int32_t> dlabels(labels), dpred(pred);
    ASSERT_TRUE(cuda_
                    ->SoftmaxCrossEntropy(dlogits.get(), ld, n, c, dlabels.get(), 0.5f, ddl.get(),
                                          dstats.get(), dpred.get())
                    .ok());
    ASSERT_TRUE(cpu_->SoftmaxCrossEntropy(logits.data(), ld, n, c, labels.data(), 0.5f, dl.data(),
                                          stats.data(), pred.data())
                    .ok());
    const std::string what = "c=" + std::to_string(c) + " n=" + std::to_string(n);
    EXPECT_TRUE(AllClose(ddl.Download(), dl, 1e-4, 1e-7)) << what;
    const std::vector<float> got = dstats.Download();
    EXPECT_TRUE(AllClose(got, stats, 1e-4, 1e-3)) << what;
    EXPECT_EQ(dpred.Download(), pred) << what;
    for (int again = 0; again < 3; ++again) {
      DeviceArray<float> dstats2(std::vector<float>{1.0f, 2.0f});
      ASSERT_TRUE(cuda_
                      ->SoftmaxCrossEntropy(dlogits.get(), ld, n, c, dlabels.get(), 0.5f, nullptr,
                                            dstats2.get(), nullptr)
                      .ok());
      EXPECT_EQ(dstats2.Download(), got) << what << ": not the same bits again";
    }
  }
}

// Against the CPU, in one chunk of rows and in several (column_reduce.cuh), and the same bits
// every time: the chunks meet in a workspace, not through atomic adds.
TEST_F(CudaKernelsTest, ColumnReductionsAndFillMatchTheCpu) {
  struct Case {
    int64_t m, w, ld;
  };
  for (const Case& c : {Case{1, 37, 40}, Case{100, 37, 40}, Case{20000, 37, 40},
                        Case{10000, 750, 750}, Case{3000, 5000, 5000}}) {
    const int64_t m = c.m, w = c.w, ld = c.ld;
    const int sms = static_cast<CudaKernels*>(cuda_)->num_sms();
    const std::string what = "m=" + std::to_string(m) + " w=" + std::to_string(w) + ", " +
                             std::to_string(column_reduce::Chunks(
                                 m, w, sms, sms * CudaKernels::kWorkspaceFloatsPerSm, sms)) +
                             " chunks";
    std::vector<float> x = RandomFloats(m * ld, 12), y = RandomFloats(m * ld, 13);
    const std::vector<float> sum0 = RandomFloats(w, 14), dot0 = RandomFloats(w, 15);
    std::vector<float> sum = sum0, dot = dot0;
    DeviceArray<float> dx(x), dy(y), dsum(sum), ddot(dot);
    ASSERT_TRUE(cuda_->ColumnSum(dx.get(), ld, m, w, -0.5f, dsum.get()).ok());
    ASSERT_TRUE(cpu_->ColumnSum(x.data(), ld, m, w, -0.5f, sum.data()).ok());
    ASSERT_TRUE(cuda_->ColumnDot(dx.get(), ld, dy.get(), ld, m, w, ddot.get()).ok());
    ASSERT_TRUE(cpu_->ColumnDot(x.data(), ld, y.data(), ld, m, w, dot.data()).ok());
    const std::vector<float> got_sum = dsum.Download(), got_dot = ddot.Download();
    EXPECT_TRUE(AllClose(got_sum, sum, 1e-4, 1e-3)) << what;
    EXPECT_TRUE(AllClose(got_dot, dot, 1e-4, 1e-3)) << what;
    for (int again = 0; again < 3; ++again) {
      DeviceArray<float> dsum2(sum0), ddot2(dot0);
      ASSERT_TRUE(cuda_->ColumnSum(dx.get(), ld, m, w, -0.5f, dsum2.get()).ok());
      ASSERT_TRUE(cuda_->ColumnDot(dx.get(), ld, dy.get(), ld, m, w, ddot2.get()).ok());
      EXPECT_EQ(dsum2.Download(), got_sum) << what << ": not the same bits again";
      EXPECT_EQ(ddot2.Download(), got_dot) << what << ": not the same bits again";
    }
  }
  DeviceArray<float> buf(1001);
  ASSERT_TRUE(cuda_->Fill(buf.get(), 1001, 2.5f).ok());
  EXPECT_EQ(buf.Download(), std::vector<float>(1001, 2.5f));
  ASSERT_TRUE(cuda_->Fill(buf.get(), 1000, 0.0f).ok());
  std::vector<float> want(1001, 0.0f);
  want[1000] = 2.5f;
  EXPECT_EQ(buf.Download(), want);
}

// Through cublasSgemm and through cuBLASLt with the heuristic's algorithm (the default; or
// autotuned, where CAVS_GEMM_AUTOTUNE=1), the small GEMM off; then with the default small-GEMM
// setting, which takes the untransposed problem.
TEST_F(CudaKernelsTest, GemmMatchesTheCpuForEveryTranspose) {
  absl::StatusOr<CudaKernels*> cuda = GetCudaKernels(0);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  const testing::KeepGemmSettings keep(*cuda);  // cuBLASLt's setting too
  const bool was_lt = (*cuda)->cublas_lt();
  (*cuda)->SetSmallGemm(CudaKernels::SmallGemm::kOff);
  for (bool lt : {false, true}) {
    ASSERT_TRUE((*cuda)->SetCublasLt(lt).ok());
    const int64_t m = 67, n = 45, k = 129;
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const int64_t lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 3;
        std::vector<float> a = RandomFloats((ta ? k : m) * lda, 16);
        std::vector<float> b = RandomFloats((tb ? n : k) * ldb, 17);
        std::vector<float> c = RandomFloats(m * ldc, 18);
        EXPECT_TRUE(GemmMatches(ta, tb, m, n, k, 0.75f, a, lda, b, ldb, 0.5f, c, c, ldc, 0))
            << "ta=" << ta << " tb=" << tb << " cuBLASLt " << lt;
        // With a bias row (GemmBias): cuBLASLt's epilogue where the bias is 16-byte aligned,
        // else (offset by a float) and on cublasSgemm the GEMM and a kernel adding the bias.
        const std::vector<float> bias = RandomFloats(n + 1, 24);
        for (int64_t bias_offset : {0, 1}) {
          EXPECT_TRUE(GemmMatches(ta, tb, m, n, k, 0.75f, a, lda, b, ldb, 0.5f, c, c, ldc, 0, bias,
                                  bias_offset))
              << "ta=" << ta << " tb=" << tb << " cuBLASLt " << lt << " bias offset "
              << bias_offset;
        }
      }
    }
  }
  ASSERT_TRUE((*cuda)->SetCublasLt(was_lt).ok());
  (*cuda)->SetSmallGemm(CudaKernels::SmallGemm::kWhereFaster);
  const int64_t m = 64, n = 750, k = 300;  // a forward round: small_gemm::Faster
  std::vector<float> a = RandomFloats(m * k, 19), b = RandomFloats(k * n, 20),
                     c = RandomFloats(m * n, 21);
  EXPECT_TRUE(GemmMatches(false, false, m, n, k, 1.0f, a, k, b, n, 1.0f, c, c, n, 0));
}

// The small-GEMM kernel (small_gemm.h), where it applies (a not transposed, m <= 512), against
// the CPU: tile edges, several chunks of k, both layouts of B, offset operands, beta 0 over NaNs
// (C must not be read) and 1; through Gemm with the small GEMM everywhere.
TEST_F(CudaKernelsTest, SmallGemmMatchesTheCpu) {
  absl::StatusOr<CudaKernels*> cuda = GetCudaKernels(0);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  const testing::KeepGemmSettings keep(*cuda);
  (*cuda)->SetSmallGemm(CudaKernels::SmallGemm::kEverywhere);
  struct Case {
    int64_t m, n, k;
  };
  for (const Case cs : {Case{1, 1, 1}, Case{17, 33, 300}, Case{64, 750, 300}, Case{5, 300, 750},
                        Case{64, 2048, 512}, Case{3, 40, 1100}, Case{512, 64, 20},
                        Case{65, 17, 513}, Case{100, 750, 300}}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 1.0f}) {
        for (bool with_bias : {false, true}) {
          const int64_t offset = cs.m % 3, lda = cs.k + 1, ldb = (tb ? cs.k : cs.n) + 3,
                        ldc = cs.n + 2;
          std::vector<float> a = RandomFloats(cs.m * lda + offset, 41);
          std::vector<float> b = RandomFloats((tb ? cs.n : cs.k) * ldb + offset, 42);
          std::vector<float> c = RandomFloats(cs.m * ldc + offset, 43), c_gpu = c;
          if (beta == 0.0f) {  // NaNs where the GPU must not read, zeros for the CPU
            for (int64_t r = 0; r < cs.m; ++r) {
              c_gpu[offset + r * ldc] = std::nanf("");
              c[offset + r * ldc] = 0.0f;
            }
          }
          // A bias row at any float offset: the kernel adds it in its store.
          const std::vector<float> bias =
              with_bias ? RandomFloats(cs.n + 1, 47) : std::vector<float>();
          EXPECT_TRUE(GemmMatches(false, tb, cs.m, cs.n, cs.k, 0.5f, a, lda, b, ldb, beta, c_gpu, c,
                                  ldc, offset, bias, cs.m % 2))
              << "m=" << cs.m << " n=" << cs.n << " k=" << cs.k << " tb=" << tb << " beta=" << beta
              << " bias " << with_bias;
        }
      }
    }
  }
}

// cuBLASLt on, autotuned (the parameter) or not, for each test; the settings restored after.
class CublasLtTest : public CudaKernelsTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    CudaKernelsTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    absl::StatusOr<CudaKernels*> cuda = GetCudaKernels(0);
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    lt_ = *cuda;
    was_on_ = lt_->cublas_lt();
    ASSERT_TRUE(lt_->SetCublasLt(true).ok());
    was_tuning_ = lt_->gemm_autotune();
    ASSERT_TRUE(lt_->SetGemmAutotune(GetParam()).ok());
  }
  void TearDown() override {
    if (lt_ == nullptr) return;
    EXPECT_TRUE(lt_->SetGemmAutotune(was_tuning_).ok());
    EXPECT_TRUE(lt_->SetCublasLt(was_on_).ok());
  }

  CudaKernels* lt_ = nullptr;
  bool was_on_ = false, was_tuning_ = false;
};

// cuBLASLt with memoized plans, with the heuristic's algorithm and autotuned: every transpose,
// one row to many, operands offset by a few floats from the allocation (so less than 256-byte
// aligned), beta 0 and 1; each problem twice (the second call reuses the plan). Against the
// CPU, as cublasSgemm above. Autotuning times its candidates into a scratch matrix: with beta 1,
// a candidate that wrote c would show here as c counted twice.
TEST_P(CublasLtTest, MatchesTheCpu) {
  const bool tune = GetParam();
  const int64_t planned = lt_->lt_problems_planned();
  const int64_t tuned = lt_->lt_classes_tuned();
  const int64_t unsupported = lt_->lt_problems_unsupported();
  int problems = 0;
  for (int64_t m : {1, 7, 64, 300, 301}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (int64_t offset : {0, 1, 3}) {
          for (float beta : {0.0f, 1.0f}) {
            const int64_t n = 45 + offset, k = 150;
            const int64_t lda = (ta ? m : k) + offset, ldb = (tb ? k : n), ldc = n + offset;
            const int64_t a_size = (ta ? k : m) * lda + offset,
                          b_size = (tb ? n : k) * ldb + offset;
            std::vector<float> a = RandomFloats(a_size, 21), b = RandomFloats(b_size, 22);
            const std::vector<float> c = RandomFloats(m * ldc + offset, 23);
            for (int call = 0; call < 2; ++call) {
              EXPECT_TRUE(
                  GemmMatches(ta, tb, m, n, k, 0.75f, a, lda, b, ldb, beta, c, c, ldc, offset))
                  << "m=" << m << " ta=" << ta << " tb=" << tb << " offset=" << offset
                  << " beta=" << beta << " call " << call;
            }
            ++problems;
          }
        }
      }
    }
  }
  // One plan per problem, not per call (unless the cache was full and dropped them).
  EXPECT_LE(lt_->lt_problems_planned() - planned, problems);
  EXPECT_EQ(lt_->lt_problems_unsupported(), unsupported);
  // Tuning: once per class, and 300 and 301 rows are one class (m rounded up to 384).
  if (tune) {
    EXPECT_GT(lt_->lt_classes_tuned(), tuned);
    EXPECT_LT(lt_->lt_classes_tuned() - tuned, problems);
  } else {
    EXPECT_EQ(lt_->lt_classes_tuned(), tuned);
  }
}

// A bias row in cuBLASLt's epilogue (GemmBias): cuBLASLt plans these problems, a forward
// round's GEMM and the x W of a batch's leaves among them, with the heuristic and autotuned
// (which does not time cublasSgemm for them), beta 0 and 1, each three times: the bias's
// alignment is part of a plan, and a plan reused sets the bias pointer again.
TEST_P(CublasLtTest, BiasInTheEpilogue) {
  const testing::KeepGemmSettings keep(lt_);
  lt_->SetSmallGemm(CudaKernels::SmallGemm::kOff);  // else it takes the 64-row round
  const int64_t unsupported = lt_->lt_problems_unsupported();
  const int64_t to_sgemm = lt_->lt_problems_to_sgemm();
  const int64_t planned = lt_->lt_problems_planned();
  struct Case {
    int64_t m, n, k;
  };
  const Case cases[] = {{64, 750, 300}, {300, 750, 300}, {4800, 750, 300}, {7, 45, 150}};
  for (const Case cs : cases) {
    for (float beta : {0.0f, 1.0f}) {
      std::vector<float> a = RandomFloats(cs.m * cs.k, 34), b = RandomFloats(cs.k * cs.n, 35);
      const std::vector<float> c = RandomFloats(cs.m * cs.n, 36);
      // The bias 256-byte aligned, then twice 16-byte aligned at other addresses (4 and 68
      // floats in): the third call reuses the second's plan, so a pointer left from an earlier
      // call would show.
      for (int call = 0; call < 3; ++call) {
        const int64_t offset = call == 0 ? 0 : call == 1 ? 4 : 68;
        EXPECT_TRUE(GemmMatches(false, false, cs.m, cs.n, cs.k, 1.0f, a, cs.k, b, cs.n, beta, c, c,
                                cs.n, 0, RandomFloats(cs.n + 68, 37 + call), offset))
            << "m=" << cs.m << " n=" << cs.n << " k=" << cs.k << " beta=" << beta << " call "
            << call;
      }
    }
  }
  // Every one of them in cuBLASLt: none without an algorithm, none left to cublasSgemm.
  EXPECT_EQ(lt_->lt_problems_unsupported(), unsupported);
  EXPECT_EQ(lt_->lt_problems_to_sgemm(), to_sgemm);
  // At most one plan a shape and bias alignment (beta is not part of a plan), not one a call.
  EXPECT_LE(lt_->lt_problems_planned() - planned, 2 * static_cast<int64_t>(std::size(cases)));
}

// A class first planned (and tuned) on operands whose rows are 16-byte aligned, then the same
// sizes offset by one float (4-byte aligned): the class's algorithm may need more than that,
// and must not be used for them.
TEST_P(CublasLtTest, AlignedThenOffsetOperands) {
  const int64_t m = 64, n = 48, k = 160;
  for (int64_t offset : {0, 1, 2, 0}) {
    const int64_t lda = k + 4, ldb = n + 4, ldc = n + 4;  // rows of 16-byte multiples
    std::vector<float> a = RandomFloats(m * lda + offset, 31),
                       b = RandomFloats(k * ldb + offset, 32);
    std::vector<float> c = RandomFloats(m * ldc + offset, 33);
    EXPECT_TRUE(GemmMatches(false, false, m, n, k, 1.0f, a, lda, b, ldb, 1.0f, c, c, ldc, offset))
        << "offset " << offset;
  }
  ASSERT_TRUE(lt_->Synchronize().ok());
}

INSTANTIATE_TEST_SUITE_P(HeuristicAndTuned, CublasLtTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Autotuned" : "Heuristic";
                         });

}  // namespace
}  // namespace cavs::ops::cuda
