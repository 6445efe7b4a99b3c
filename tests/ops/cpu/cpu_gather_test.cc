// GatherRows, ScatterAddRows, SegmentReduce and SegmentReduceGrad of CpuKernels against naive
// loops: absent (-1) indices, duplicate destinations, empty segments, kMax's argmax and the
// routing of its gradient, finite differences of the reductions, and thread-count invariance
// (accumulation order is the serial one, so results are compared exactly).
#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "ops/cpu/cpu_kernels.h"
#include "tests/ops/ops_test_util.h"

namespace cavs::ops::cpu {
namespace {

using testing::AllClose;
using testing::RandomFloats;
using testing::RandomInts;

Kernels* K() { return CpuKernels::Get(); }

TEST(CpuGatherTest, GatherRowsCopiesOrZeroes) {
  const int64_t src_rows = 9, w = 11, src_ld = 13, dst_ld = 12;
  const std::vector<float> src = RandomFloats(src_rows * src_ld, 1);
  const std::vector<int32_t> idx = {3, -1, 0, 8, 3, -5, 7};
  const int64_t m = static_cast<int64_t>(idx.size());
  std::vector<float> dst(m * dst_ld, 42.0f);
  ASSERT_TRUE(K()->GatherRows(src.data(), src_ld, idx.data(), m, w, dst.data(), dst_ld).ok());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < dst_ld; ++c) {
      const float want = c >= w ? 42.0f : idx[i] < 0 ? 0.0f : src[idx[i] * src_ld + c];
      ASSERT_EQ(dst[i * dst_ld + c], want) << i << "," << c;
    }
  }
}

// Naive scatter-add, in source order.
std::vector<float> NaiveScatter(const std::vector<float>& src, const std::vector<int32_t>& idx,
                                int64_t w, std::vector<float> dst) {
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < 0) continue;
    for (int64_t c = 0; c < w; ++c) dst[idx[i] * w + c] += src[i * w + c];
  }
  return dst;
}

TEST(CpuGatherTest, ScatterAddWithDuplicatesAndSkips) {
  for (int64_t m : {6, 5000}) {  // small, and above the parallel threshold
    const int64_t w = 9, dst_rows = 40;
    const std::vector<float> src = RandomFloats(m * w, 2);
    const std::vector<int32_t> idx = RandomInts(m, 3, -1, dst_rows - 1);
    const std::vector<float> dst0 = RandomFloats(dst_rows * w, 4);
    const std::vector<float> want = NaiveScatter(src, idx, w, dst0);
    for (int threads : {1, 2}) {
      SetCpuThreads(threads);
      std::vector<float> dst = dst0;
      ASSERT_TRUE(K()->ScatterAddRows(src.data(), w, idx.data(), m, w, dst.data(), w, false).ok());
      EXPECT_EQ(dst, want) << "m " << m << " threads " << threads;
    }
  }
  SetCpuThreads(0);
}

TEST(CpuGatherTest, ScatterAddUnique) {
  const int64_t m = 3000, w = 16, dst_rows = 4000;
  std::vector<int32_t> idx(m);
  for (int64_t i = 0; i < m; ++i) idx[i] = static_cast<int32_t>((i * 7919) % dst_rows);
  idx[10] = -1;
  const std::vector<float> src = RandomFloats(m * w, 5);
  const std::vector<float> dst0 = RandomFloats(dst_rows * w, 6);
  std::vector<float> dst = dst0;
  ASSERT_TRUE(K()->ScatterAddRows(src.data(), w, idx.data(), m, w, dst.data(), w, true).ok());
  EXPECT_EQ(dst, NaiveScatter(src, idx, w, dst0));
}

// Segments of a random DAG-like child list: lengths 0..4, ids repeat across segments.
struct Segments {
  std::vector<int32_t> offsets, ids;
};

Segments RandomSegments(int64_t m, int64_t src_rows, uint32_t seed) {
  const std::vector<int32_t> lens = RandomInts(m, seed, 0, 4);
  Segments s;
  s.offsets.push_back(0);
  for (int32_t len : lens) s.offsets.push_back(s.offsets.back() + len);
  s.ids = RandomInts(s.offsets.back(), seed + 1, 0, static_cast<int32_t>(src_rows - 1));
  return s;
}

// The naive reduction of segment i, column c; sets *arg for kMax.
double NaiveReduce(ReduceOp op, const std::vector<float>& src, int64_t ld, const Segments& s,
                   int64_t i, int64_t c, int32_t* arg) {
  const int32_t lo = s.offsets[i], hi = s.offsets[i + 1];
  *arg = -1;
  if (lo == hi) return 0.0;
  double acc = op == ReduceOp::kMax ? -INFINITY : 0.0;
  for (int32_t j = lo; j < hi; ++j) {
    const double v = src[s.ids[j] * ld + c];
    if (op != ReduceOp::kMax) {
      acc += v;
    } else if (v > acc) {
      acc = v;
      *arg = s.ids[j];
    }
  }
  return op == ReduceOp::kMean ? acc / (hi - lo) : acc;
}

TEST(CpuSegmentTest, ReduceMatchesNaiveIncludingEmptySegments) {
  for (int64_t m : {9, 3000}) {
    const int64_t w = 13, ld = 15, src_rows = 50, dst_ld = 14;
    const std::vector<float> src = RandomFloats(src_rows * ld, 7);
    const Segments s = RandomSegments(m, src_rows, 8);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
      std::vector<float> dst(m * dst_ld, 5.0f);
      std::vector<int32_t> argmax(m * w, -7);
      ASSERT_TRUE(K()->SegmentReduce(op, src.data(), ld, s.offsets.data(), s.ids.data(), m, w,
                                     dst.data(), dst_ld, argmax.data())
                      .ok());
      std::vector<double> want(dst.begin(), dst.end());
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t c = 0; c < w; ++c) {
          int32_t arg;
          want[i * dst_ld + c] = NaiveReduce(op, src, ld, s, i, c, &arg);
          if (op == ReduceOp::kMax) {
            ASSERT_EQ(argmax[i * w + c], arg) << "segment " << i << " column " << c;
          }
        }
      }
      EXPECT_TRUE(AllClose(dst, want, 1e-6, 1e-7)) << "op " << static_cast<int>(op);
      if (op != ReduceOp::kMax) EXPECT_EQ(argmax[0], -7);  // only kMax writes argmax
    }
  }
}

TEST(CpuSegmentTest, MaxTiesGoToTheFirstIdAndArgmaxMayBeNull) {
  const std::vector<float> src = {1, 5, 2, 5, 3, 0};  // rows of width 2
  const std::vector<int32_t> offsets = {0, 3}, ids = {2, 1, 0};
  std::vector<float> dst(2);
  std::vector<int32_t> argmax(2);
  ASSERT_TRUE(K()->SegmentReduce(ReduceOp::kMax, src.data(), 2, offsets.data(), ids.data(), 1, 2,
                                 dst.data(), 2, argmax.data())
                  .ok());
  EXPECT_EQ(dst, (std::vector<float>{3, 5}));
  EXPECT_EQ(argmax, (std::vector<int32_t>{2, 1}));  // column 1: rows 1 and 0 tie at 5
  ASSERT_TRUE(K()->SegmentReduce(ReduceOp::kMax, src.data(), 2, offsets.data(), ids.data(), 1, 2,
                                 dst.data(), 2, nullptr)
                  .ok());
  EXPECT_EQ(dst, (std::vector<float>{3, 5}));
}

TEST(CpuSegmentTest, GradRoutesToSegmentMembersAndArgmax) {
  for (int64_t m : {9, 3000}) {
    const int64_t w = 13, src_rows = 50, dy_ld = 16, ds_ld = 14;
    const std::vector<float> src = RandomFloats(src_rows * w, 9);
    const std::vector<float> dy = RandomFloats(m * dy_ld, 10);
    const std::vector<float> ds0 = RandomFloats(src_rows * ds_ld, 11);
    const Segments s = RandomSegments(m, src_rows, 12);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
      std::vector<float> out(m * w);
      std::vector<int32_t> argmax(m * w);
      ASSERT_TRUE(K()->SegmentReduce(op, src.data(), w, s.offsets.data(), s.ids.data(), m, w,
                                     out.data(), w, argmax.data())
                      .ok());
      std::vector<double> want(ds0.begin(), ds0.end()), scale(want.size());
      std::vector<int64_t> terms(want.size(), 1);
      auto add = [&](int64_t at, double v) {
        want[at] += v;
        scale[at] += std::fabs(v);
        ++terms[at];
      };
      for (int64_t i = 0; i < m; ++i) {
        const int32_t len = s.offsets[i + 1] - s.offsets[i];
        for (int64_t c = 0; c < w; ++c) {
          const double g = dy[i * dy_ld + c];
          if (op == ReduceOp::kMax) {
            if (argmax[i * w + c] >= 0) add(argmax[i * w + c] * ds_ld + c, g);
            continue;
          }
          for (int32_t j = s.offsets[i]; j < s.offsets[i + 1]; ++j) {
            add(s.ids[j] * ds_ld + c, op == ReduceOp::kMean ? g / len : g);
          }
        }
      }
      for (size_t i = 0; i < want.size(); ++i) scale[i] += std::fabs(ds0[i]);
      // Each element a float32 sum of its terms (a mean's g / len rounded once more): within
      // the sum's bound, relative to Σ|terms|, in any order the threads take.
      const int64_t most_terms = *std::max_element(terms.begin(), terms.end());
      for (int threads : {1, 2}) {
        SetCpuThreads(threads);
        std::vector<float> ds = ds0;
        ASSERT_TRUE(K()->SegmentReduceGrad(op, dy.data(), dy_ld, s.offsets.data(), s.ids.data(),
                                           argmax.data(), m, w, ds.data(), ds_ld)
                        .ok());
        EXPECT_TRUE(AllClose(ds, want, testing::SumErrorBound(most_terms + 1), 0.0, &scale))
            << "op " << static_cast<int>(op) << " m " << m << " threads " << threads;
      }
    }
  }
  SetCpuThreads(0);
}

// d/dsrc of L = Σ dy ⊙ SegmentReduce(src), by central differences, equals SegmentReduceGrad.
TEST(CpuSegmentTest, GradMatchesFiniteDifferences) {
  const int64_t m = 4, w = 3, src_rows = 6;
  const Segments s = {{0, 2, 2, 5, 6}, {0, 3, 1, 3, 5, 4}};  // segment 1 empty, id 3 repeats
  const std::vector<float> dy = RandomFloats(m * w, 13);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
    std::vector<float> src = RandomFloats(src_rows * w, 14);  // distinct values: no max ties
    auto loss = [&](const std::vector<float>& x) {
      std::vector<float> out(m * w);
      EXPECT_TRUE(K()->SegmentReduce(op, x.data(), w, s.offsets.data(), s.ids.data(), m, w,
                                     out.data(), w, nullptr)
                      .ok());
      double l = 0;
      for (int64_t i = 0; i < m * w; ++i) l += static_cast<double>(dy[i]) * out[i];
      return l;
    };
    std::vector<float> out(m * w), grad(src_rows * w, 0.0f);
    std::vector<int32_t> argmax(m * w);
    ASSERT_TRUE(K()->SegmentReduce(op, src.data(), w, s.offsets.data(), s.ids.data(), m, w,
                                   out.data(), w, argmax.data())
                    .ok());
    ASSERT_TRUE(K()->SegmentReduceGrad(op, dy.data(), w, s.offsets.data(), s.ids.data(),
                                       argmax.data(), m, w, grad.data(), w)
                    .ok());
    const float h = 1e-3f;
    for (size_t e = 0; e < src.size(); ++e) {
      const float x = src[e];
      src[e] = x + h;
      const double up = loss(src);
      src[e] = x - h;
      const double down = loss(src);
      src[e] = x;
      EXPECT_NEAR(grad[e], (up - down) / (2 * h), 2e-3)
          << "op " << static_cast<int>(op) << " @" << e;
    }
  }
}

TEST(CpuSegmentTest, RejectsMalformedSegments) {
  const std::vector<float> src(20);
  std::vector<float> dst(20);
  const auto kBad = absl::StatusCode::kInvalidArgument;
  const std::vector<int32_t> decreasing = {0, 3, 2}, negative_start = {-1, 1, 2};
  const std::vector<int32_t> ids = {0, 1, 2}, negative_id = {0, -1, 2};
  auto reduce = [&](const std::vector<int32_t>& off, const std::vector<int32_t>& i) {
    return K()
        ->SegmentReduce(ReduceOp::kSum, src.data(), 2, off.data(), i.data(), 2, 2, dst.data(), 2,
                        nullptr)
        .code();
  };
  EXPECT_EQ(reduce(decreasing, ids), kBad);
  EXPECT_EQ(reduce(negative_start, ids), kBad);
  EXPECT_EQ(reduce({0, 1, 3}, negative_id), kBad);
  EXPECT_EQ(K()->SegmentReduceGrad(ReduceOp::kMax, src.data(), 2, ids.data(), ids.data(), nullptr,
                                   2, 2, dst.data(), 2)
                .code(),
            kBad);
}

}  // namespace
}  // namespace cavs::ops::cpu
