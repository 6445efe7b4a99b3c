#include "ops/cpu/cpu_gather.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cpu/cpu_math.h"
#include "ops/cpu/cpu_parallel.h"

namespace cavs::ops::cpu {
namespace {

// Destination rows are dealt to partition classes in groups of this many, so that two tasks
// rarely write the same cache line.
constexpr int64_t kRowGroup = 16;
// Column blocks of the column-partitioned kMax gradient.
constexpr int64_t kColumnBlock = 16;

CAVS_CPU_INLINE void AddRow(float* d, const float* s, int64_t w) {
#pragma GCC ivdep
  for (int64_t c = 0; c < w; ++c) d[c] += s[c];
}

absl::Status CheckSizes(const char* op, int64_t m, int64_t w) {
  if (m < 0 || w < 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": negative size m=", m, " w=", w));
  }
  return absl::OkStatus();
}

// A [rows, w] operand: non-null, and rows that do not overlap when `written` by several rows.
absl::Status CheckMatrix(const char* op, const char* name, const void* p, int64_t ld, int64_t w,
                         bool written) {
  if (p == nullptr || ld < 0 || (written && ld < w)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", name, " is null or its ld ", ld, " is invalid for width ", w));
  }
  return absl::OkStatus();
}

// offsets: [m + 1] non-decreasing from >= 0; ids over the covered range >= 0.
absl::Status CheckSegments(const char* op, const int32_t* offsets, const int32_t* ids, int64_t m) {
  if (offsets == nullptr) return absl::InvalidArgumentError(absl::StrCat(op, ": offsets is null"));
  if (offsets[0] < 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": offsets[0] = ", offsets[0], " < 0"));
  }
  for (int64_t i = 0; i < m; ++i) {
    if (offsets[i + 1] < offsets[i]) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": offsets decrease at segment ", i, " (",
                                                     offsets[i], " > ", offsets[i + 1], ")"));
    }
  }
  if (offsets[m] > offsets[0] && ids == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ids is null"));
  }
  for (int64_t j = offsets[0]; j < offsets[m]; ++j) {
    if (ids[j] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": ids[", j, "] = ", ids[j], " < 0"));
    }
  }
  return absl::OkStatus();
}

// Runs fn(cls) for the classes of a destination-row partition (two per thread). A task owns
// the destination rows r with (r / kRowGroup) % classes == cls.
void ForEachRowClass(int64_t work, absl::FunctionRef<void(int64_t cls, int64_t classes)> fn) {
  const int threads = CpuThreads();
  if (threads <= 1 || work < kParallelMinWork) {
    fn(0, 1);
    return;
  }
  const int64_t classes = 2 * int64_t{threads};
  RunTasks(classes, [&](int64_t cls) { fn(cls, classes); });
}

inline bool Owns(int64_t row, int64_t cls, int64_t classes) {
  return classes == 1 || (row / kRowGroup) % classes == cls;
}

}  // namespace

namespace internal {

// Scatter-add of rows [begin, end) restricted to destination class `cls` of `classes`.
CAVS_CPU_VECTOR_CLONES
void ScatterAddRange(const float* src, int64_t src_ld, const int32_t* idx, int64_t begin,
                     int64_t end, int64_t w, float* dst, int64_t dst_ld, int64_t cls,
                     int64_t classes) {
  for (int64_t i = begin; i < end; ++i) {
    if (idx[i] >= 0 && Owns(idx[i], cls, classes)) {
      AddRow(dst + idx[i] * dst_ld, src + i * src_ld, w);
    }
  }
}

// Sum, mean or max of one segment of `len` ids into d: [w] (and am: [w] for kMax, or null).
CAVS_CPU_VECTOR_CLONES
void ReduceSegment(ReduceOp op, const float* src, int64_t src_ld, const int32_t* ids, int64_t len,
                   int64_t w, float* d, int32_t* am) {
  if (len == 0) {
    std::fill(d, d + w, 0.0f);
    if (am != nullptr) std::fill(am, am + w, -1);
    return;
  }
  std::memcpy(d, src + ids[0] * src_ld, static_cast<size_t>(w) * sizeof(float));
  if (op != ReduceOp::kMax) {
    for (int64_t j = 1; j < len; ++j) AddRow(d, src + ids[j] * src_ld, w);
    if (op == ReduceOp::kMean) {
      const float n = static_cast<float>(len);
      for (int64_t c = 0; c < w; ++c) d[c] /= n;
    }
    return;
  }
  if (am != nullptr) std::fill(am, am + w, ids[0]);
  for (int64_t j = 1; j < len; ++j) {
    const float* s = src + ids[j] * src_ld;
    const int32_t id = ids[j];
    if (am != nullptr) {
      for (int64_t c = 0; c < w; ++c) {
        const bool better = s[c] > d[c];
        am[c] = better ? id : am[c];
        d[c] = better ? s[c] : d[c];
      }
    } else {
      for (int64_t c = 0; c < w; ++c) d[c] = s[c] > d[c] ? s[c] : d[c];
    }
  }
}

// Sum/mean gradient of segments [begin, end) restricted to destination class `cls`.
CAVS_CPU_VECTOR_CLONES
void SegmentGradRange(bool mean, const float* dy, int64_t dy_ld, const int32_t* offsets,
                      const int32_t* ids, int64_t begin, int64_t end, int64_t w, float* dsrc,
                      int64_t dsrc_ld, int64_t cls, int64_t classes) {
  for (int64_t i = begin; i < end; ++i) {
    const int64_t len = offsets[i + 1] - offsets[i];
    const float* g = dy + i * dy_ld;
    const float n = static_cast<float>(len);
    for (int64_t j = offsets[i]; j < offsets[i + 1]; ++j) {
      if (!Owns(ids[j], cls, classes)) continue;
      float* d = dsrc + ids[j] * dsrc_ld;
      if (mean) {
#pragma GCC ivdep
        for (int64_t c = 0; c < w; ++c) d[c] += g[c] / n;
      } else {
        AddRow(d, g, w);
      }
    }
  }
}

// kMax gradient over columns [c0, c1) of every segment.
void SegmentMaxGradColumns(const float* dy, int64_t dy_ld, const int32_t* argmax, int64_t m,
                           int64_t w, int64_t c0, int64_t c1, float* dsrc, int64_t dsrc_ld) {
  for (int64_t i = 0; i < m; ++i) {
    const float* g = dy + i * dy_ld;
    const int32_t* am = argmax + i * w;
    for (int64_t c = c0; c < c1; ++c) {
      if (am[c] >= 0) dsrc[am[c] * dsrc_ld + c] += g[c];
    }
  }
}

}  // namespace internal

absl::Status GatherRows(const float* src, int64_t src_ld, const int32_t* idx, int64_t m, int64_t w,
                        float* dst, int64_t dst_ld) {
  CAVS_RETURN_IF_ERROR(CheckSizes("GatherRows", m, w));
  if (m == 0 || w == 0) return absl::OkStatus();
  CAVS_RETURN_IF_ERROR(CheckMatrix("GatherRows", "src", src, src_ld, w, false));
  CAVS_RETURN_IF_ERROR(CheckMatrix("GatherRows", "dst", dst, dst_ld, w, m > 1));
  if (idx == nullptr) return absl::InvalidArgumentError("GatherRows: idx is null");
  ParallelFor(m, w, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* d = dst + i * dst_ld;
      if (idx[i] < 0) {
        std::fill(d, d + w, 0.0f);
      } else {
        std::memcpy(d, src + idx[i] * src_ld, static_cast<size_t>(w) * sizeof(float));
      }
    }
  });
  return absl::OkStatus();
}

absl::Status ScatterAddRows(const float* src, int64_t src_ld, const int32_t* idx, int64_t m,
                            int64_t w, float* dst, int64_t dst_ld, bool unique) {
  CAVS_RETURN_IF_ERROR(CheckSizes("ScatterAddRows", m, w));
  if (m == 0 || w == 0) return absl::OkStatus();
  CAVS_RETURN_IF_ERROR(CheckMatrix("ScatterAddRows", "src", src, src_ld, w, false));
  CAVS_RETURN_IF_ERROR(CheckMatrix("ScatterAddRows", "dst", dst, dst_ld, w, true));
  if (idx == nullptr) return absl::InvalidArgumentError("ScatterAddRows: idx is null");
  if (unique) {
    ParallelFor(m, w, [&](int64_t begin, int64_t end) {
      internal::ScatterAddRange(src, src_ld, idx, begin, end, w, dst, dst_ld, 0, 1);
    });
    return absl::OkStatus();
  }
  ForEachRowClass(m * w, [&](int64_t cls, int64_t classes) {
    internal::ScatterAddRange(src, src_ld, idx, 0, m, w, dst, dst_ld, cls, classes);
  });
  return absl::OkStatus();
}

absl::Status SegmentReduce(ReduceOp op, const float* src, int64_t src_ld, const int32_t* offsets,
                           const int32_t* ids, int64_t m, int64_t w, float* dst, int64_t dst_ld,
                           int32_t* argmax) {
  CAVS_RETURN_IF_ERROR(CheckSizes("SegmentReduce", m, w));
  if (m == 0 || w == 0) return absl::OkStatus();
  CAVS_RETURN_IF_ERROR(CheckSegments("SegmentReduce", offsets, ids, m));
  if (offsets[m] > offsets[0]) {
    CAVS_RETURN_IF_ERROR(CheckMatrix("SegmentReduce", "src", src, src_ld, w, false));
  }
  CAVS_RETURN_IF_ERROR(CheckMatrix("SegmentReduce", "dst", dst, dst_ld, w, m > 1));
  const int64_t total = offsets[m] - offsets[0];
  const int64_t work_per_segment = std::max<int64_t>(1, (total + m) * w / m);
  int32_t* am = op == ReduceOp::kMax ? argmax : nullptr;
  ParallelFor(m, work_per_segment, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      internal::ReduceSegment(op, src, src_ld, ids + offsets[i], offsets[i + 1] - offsets[i], w,
                              dst + i * dst_ld, am != nullptr ? am + i * w : nullptr);
    }
  });
  return absl::OkStatus();
}

absl::Status SegmentReduceGrad(ReduceOp op, const float* dy, int64_t dy_ld, const int32_t* offsets,
                               const int32_t* ids, const int32_t* argmax, int64_t m, int64_t w,
                               float* dsrc, int64_t dsrc_ld) {
  CAVS_RETURN_IF_ERROR(CheckSizes("SegmentReduceGrad", m, w));
  if (m == 0 || w == 0) return absl::OkStatus();
  CAVS_RETURN_IF_ERROR(CheckMatrix("SegmentReduceGrad", "dy", dy, dy_ld, w, false));
  CAVS_RETURN_IF_ERROR(CheckMatrix("SegmentReduceGrad", "dsrc", dsrc, dsrc_ld, w, true));
  if (op == ReduceOp::kMax) {
    if (argmax == nullptr) {
      return absl::InvalidArgumentError("SegmentReduceGrad: kMax needs the forward's argmax");
    }
    const int64_t blocks = NumChunks(w, kColumnBlock);
    ParallelFor(blocks, m * kColumnBlock, [&](int64_t begin, int64_t end) {
      internal::SegmentMaxGradColumns(dy, dy_ld, argmax, m, w, begin * kColumnBlock,
                                      std::min(w, end * kColumnBlock), dsrc, dsrc_ld);
    });
    return absl::OkStatus();
  }
  CAVS_RETURN_IF_ERROR(CheckSegments("SegmentReduceGrad", offsets, ids, m));
  const bool mean = op == ReduceOp::kMean;
  ForEachRowClass((offsets[m] - offsets[0]) * w, [&](int64_t cls, int64_t classes) {
    internal::SegmentGradRange(mean, dy, dy_ld, offsets, ids, 0, m, w, dsrc, dsrc_ld, cls, classes);
  });
  return absl::OkStatus();
}

}  // namespace cavs::ops::cpu
