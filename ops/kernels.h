// Kernels: the device-agnostic op interface the scheduler's executor is written against.
//
// Every method takes raw device pointers (from core::Tensor::raw_data() of tensors on the
// kernels' device) with explicit row strides ("ld": elements between consecutive rows; ld = 0
// broadcasts one row to every row). Matrices are row-major. Work is queued in order on the
// device's stream; methods return once it is queued (CPU: once it is done). Shapes are given
// per argument as `// name: [rows, cols]`.
//
// One implementation per device: ops/cpu (OpenBLAS and loops, always built) and ops/cuda
// (cuBLAS and custom kernels, built with CAVS_WITH_CUDA). Each comes with its device's plug-in
// (ops/device_plugin.h); executors find theirs with GetKernels(device) and ask its capabilities
// (RunsSynchronously, CallsHostHooksBetweenLaunches) rather than the device's type; how they
// run is set per process by SetKernelOptions
// (kernel_options.h). Every implementation is checked against the CPU one
// by tests/ops/kernels_equivalence_test.cc.
//
// Thread-safety: an implementation is used by one executor thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/device.h"
#include "ops/kernel_options.h"

namespace cavs::ops {

// Element-wise ops of the fused row program (see EwInstr).
enum class EwOp : uint8_t {
  kCopy,         // dst = a
  kZero,         // dst = 0
  kAdd,          // dst = a + b
  kSub,          // dst = a - b
  kMul,          // dst = a * b
  kAccumulate,   // dst += a
  kSigmoid,      // dst = 1 / (1 + exp(-a))
  kTanh,         // dst = tanh(a)
  kRelu,         // dst = max(a, 0)
  kNeg,          // dst = -a
  kScale,        // dst = scalar * a + offset
  kSum,          // dst[0] = Σ_c a[c]   (dst is one column wide)
  kBroadcast,    // dst[c] = a[0]       (a is one column wide)
  kDropout,      // dst = a * keep(seed, uid, c) / (1 - scalar); keep when uniform >= scalar
  kSigmoidGrad,  // dst = b * a * (1 - a)     (a = y, b = dy)
  kTanhGrad,     // dst = b * (1 - a * a)
  kReluGrad,     // dst = a > 0 ? b : 0
};

// Which operands an op reads (besides kAccumulate's dst): a for all but kZero, b for the
// binary ops and the gradients.
constexpr bool EwReadsA(EwOp op) { return op != EwOp::kZero; }
constexpr bool EwReadsB(EwOp op) {
  return op == EwOp::kAdd || op == EwOp::kSub || op == EwOp::kMul || op == EwOp::kSigmoidGrad ||
         op == EwOp::kTanhGrad || op == EwOp::kReluGrad;
}

// A row operand: element (r, c) is ptr[r * ld + c]. ld = 0 broadcasts one row.
// With scratch >= 0 the operand is instead a temporary of the row being computed: columns
// [scratch, scratch + width) of a scratch row the device keeps per row in flight (ptr and ld
// unused). A program writes a temporary before it reads it, within the same row, and nothing
// outside the program sees it, so it never reaches memory. Only a device whose
// ElementwiseScratch() is true accepts scratch operands.
//
// With `rows` set the operand is row-mapped: row r of the program uses row rows[r] of ptr. As
// a kCopy's dst it writes there (nothing where rows[r] < 0; no two rows may map to one row): a
// child pushing its value into its parent's gathered row. As the `a` of a kCopy or a
// kAccumulate it reads there (0 where rows[r] < 0): a child pulling its gradient from its
// parent's row. The caller promises that no instruction of the program writes a mapped
// operand's rows, nor reads a mapped dst's (the parent is in another round).
struct EwArg {
  float* ptr = nullptr;
  int64_t ld = 0;
  int64_t scratch = -1;
  const int32_t* rows = nullptr;
};

// One instruction of a fused element-wise program: applied to `width` columns of every row.
struct EwInstr {
  EwOp op = EwOp::kCopy;
  int64_t width = 0;
  EwArg dst, a, b;
  float scalar = 0.0f;
  float offset = 0.0f;
  uint64_t seed = 0;              // kDropout: the mask's Philox key
  const int32_t* uids = nullptr;  // kDropout: per-row vertex uid (mask counter = uid * width + c)
};

// The columns of the scratch row a program's scratch operands use (0: none).
inline int64_t EwScratchWidth(const EwInstr* program, int count) {
  int64_t width = 0;
  for (int i = 0; i < count; ++i) {
    const EwInstr& in = program[i];
    for (const EwArg* arg : {&in.dst, &in.a, &in.b}) {
      if (arg->scratch >= 0 && arg->scratch + in.width > width) width = arg->scratch + in.width;
    }
  }
  return width;
}

// `program` written for row 0, moved to start at row `row0`: each operand's row i becomes row
// row0 + i (a plain operand's pointer moves row0 rows, a row-mapped one's index array row0
// entries, the dropout uids row0 entries); scratch operands are per row of a launch and stay.
// out[0, count) may be `program` itself.
inline void RebaseEwProgram(const EwInstr* program, int count, int64_t row0, EwInstr* out) {
  for (int i = 0; i < count; ++i) {
    EwInstr in = program[i];
    for (EwArg* arg : {&in.dst, &in.a, &in.b}) {
      if (arg->scratch >= 0) continue;
      if (arg->rows != nullptr) {
        arg->rows += row0;
      } else if (arg->ptr != nullptr) {
        arg->ptr += row0 * arg->ld;
      }
    }
    if (in.uids != nullptr) in.uids += row0;
    out[i] = in;
  }
}

// The keep decision of kDropout, shared by every device so that masks agree.
// PhiloxUniform(seed, uid * width + c) >= p (see core/random.h).

enum class ReduceOp : uint8_t { kSum, kMean, kMax };

// One copy of a multi-copy gather or scatter-add (GatherRowsMulti, ScatterAddRowsMulti): the
// arguments of one GatherRows or ScatterAddRows call, all copies over the same m rows.
struct RowCopy {
  const float* src = nullptr;
  int64_t src_ld = 0;
  const int32_t* idx = nullptr;
  int64_t w = 0;
  float* dst = nullptr;
  int64_t dst_ld = 0;
};
inline constexpr int kMaxRowCopies = 8;

class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual core::Device device() const = 0;

  // Takes this device's part of `options` (kernel_options.h). SetKernelOptions calls it on every
  // device's kernels; an engine asks ElementwiseScratch() when it is created, so a change of
  // element-wise path belongs before. Switching a path waits for the queued work that uses it.
  [[nodiscard]] virtual absl::Status Configure(const KernelOptions& options) {
    (void)options;
    return absl::OkStatus();
  }

  // c: [m, n] = alpha * op(a) op(b) + beta * c, op(a): [m, k], op(b): [k, n]; transposes
  // are of the stored row-major matrices (a stored [k, m] when trans_a).
  [[nodiscard]] virtual absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n,
                                          int64_t k, float alpha, const float* a, int64_t lda,
                                          const float* b, int64_t ldb, float beta, float* c,
                                          int64_t ldc) = 0;

  // GEMM with a packed right operand (optional). A device that returns PackedGemmBytes(k, n)
  // > 0 can pack op(b): [k, n] once (PackGemmB, into `packed`: that many bytes, 64-byte
  // aligned, on the device) and then compute c: [m, n] = a op(b) + bias + beta * c from the
  // pack (GemmPackedB; `bias`: one row of n added to every row, or nullptr) for as long as b's
  // values stay the same: a weight read by every round's GEMM is packed once per batch instead
  // of once per call. 0 (the default): unsupported, use Gemm.
  virtual int64_t PackedGemmBytes(int64_t k, int64_t n) const {
    (void)k;
    (void)n;
    return 0;
  }
  // Whether the packed GEMM is worth taking for speed (else only where a caller needs each
  // row computed alike: RunOptions::batch_invariant). Default: wherever it exists.
  virtual bool PackedGemmFast() const { return PackedGemmBytes(1, 1) > 0; }
  [[nodiscard]] virtual absl::Status PackGemmB(bool trans_b, int64_t k, int64_t n, const float* b,
                                               int64_t ldb, float* packed) {
    (void)trans_b, (void)k, (void)n, (void)b, (void)ldb, (void)packed;
    return absl::UnimplementedError("PackGemmB: no packed GEMM on this device");
  }
  [[nodiscard]] virtual absl::Status GemmPackedB(int64_t m, int64_t n, int64_t k, const float* a,
                                                 int64_t lda, const float* packed,
                                                 const float* bias, float beta, float* c,
                                                 int64_t ldc) {
    (void)m, (void)n, (void)k, (void)a, (void)lda, (void)packed, (void)bias, (void)beta, (void)c,
        (void)ldc;
    return absl::UnimplementedError("GemmPackedB: no packed GEMM on this device");
  }

  // Capabilities. Whether a call has done its work when it returns (the CPU: kernels run on
  // the calling thread): a wait for the device is then no host synchronization, and nothing is
  // launched to be counted.
  virtual bool RunsSynchronously() const { return false; }
  // Whether a host function recorded among the launches (a closure QueueRecorded's `queue`
  // calls between two of them) runs once the earlier launches' results are in memory, so that
  // it may hand them to the caller (the engine's gradient-ready and progress hooks). Not where
  // launches are queued for later or captured into a graph.
  virtual bool CallsHostHooksBetweenLaunches() const { return false; }

  // Whether Elementwise accepts scratch operands (EwArg::scratch).
  virtual bool ElementwiseScratch() const { return false; }

  // Whether Elementwise takes a nonzero row0: a program written for row 0 run at rows row0 on
  // (RebaseEwProgram says what that means). Where not, row0 must be 0, and a caller that runs one
  // program at many rows records a rebased copy for each.
  virtual bool ElementwiseRowOffset() const { return false; }

  // Runs `count` instructions over rows [0, rows), instruction by instruction within a row,
  // rows in any order: a fused kernel for a chain of element-wise ops. `host` is the program
  // in host memory; `device` the same program in device memory (equal to `host` on the CPU).
  // With `row0` (only where ElementwiseRowOffset()), the program runs as its
  // RebaseEwProgram(row0) copy would: row i of each operand is row row0 + i, the scratch rows
  // apart, so that the rounds of a step share one program.
  //
  // `shape` (0: none) is the caller's promise that every program it passes with this nonzero
  // value has the same ops, widths, row strides and scratch columns, and the same relations
  // among its pointers: operands equal, overlapping or disjoint in one are so, the same way, in
  // every other. A device may then reuse what it derived from the first (the CUDA generated
  // kernel's plan, ops/ew_plan.h) instead of deriving it again. The engine passes one per
  // fused step of a compiled function (a step's rounds differ only in their rows).
  [[nodiscard]] virtual absl::Status Elementwise(const EwInstr* host, const EwInstr* device,
                                                 int count, int64_t rows, uint64_t shape,
                                                 int64_t row0) = 0;
  [[nodiscard]] absl::Status Elementwise(const EwInstr* host, const EwInstr* device, int count,
                                         int64_t rows) {
    return Elementwise(host, device, count, rows, 0, 0);
  }

  // A GEMM, then an element-wise program that may read what it wrote: Gemm(g.trans_a, g.trans_b,
  // g.m, ..., g.ldc), then Elementwise(host, device, count, rows, shape, row0), queued in that
  // order.
  // The engine records a round's GEMM and the fused step right after it this way, so that a
  // device may run both in one launch (FusesGemmThenElementwise). By default, and on every
  // device, the two calls (on CUDA one cooperative launch per round measured no faster:
  // bench/RESULTS.md, "One launch per round").
  //
  // `bias` (null: none) is one row of n added to every row of c after the product:
  // c = alpha * op(a) op(b) + beta * c + bias (Gemm(const GemmCall&) below).
  struct GemmCall {
    bool trans_a = false, trans_b = false;
    int64_t m = 0, n = 0, k = 0;
    float alpha = 1.0f;
    const float* a = nullptr;
    int64_t lda = 0;
    const float* b = nullptr;
    int64_t ldb = 0;
    float beta = 0.0f;
    float* c = nullptr;
    int64_t ldc = 0;
    const float* bias = nullptr;
  };
  [[nodiscard]] virtual absl::Status GemmThenElementwise(const GemmCall& g, const EwInstr* host,
                                                         const EwInstr* device, int count,
                                                         int64_t rows, uint64_t shape,
                                                         int64_t row0) {
    const absl::Status s = Gemm(g);
    if (!s.ok()) return s;
    return Elementwise(host, device, count, rows, shape, row0);
  }
  // Gemm with the arguments of `g`; with a bias, GemmBias.
  [[nodiscard]] absl::Status Gemm(const GemmCall& g) {
    if (g.bias != nullptr) return GemmBias(g);
    return Gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c,
                g.ldc);
  }
  // c = alpha * op(a) op(b) + beta * c + g.bias (one row of n, on the device, added to every
  // row; beta == 0 does not read c; a null bias adds nothing), in one call: where the device
  // can, one launch (the bias in the GEMM's epilogue), so that a GEMM that starts a sum with its
  // bias (h U + b, the first term of an internal vertex's gates) is not a fill of the bias and a
  // GEMM with beta 1. Where GemmAddsBias() is false the engine fills and accumulates instead.
  virtual bool GemmAddsBias() const { return false; }
  [[nodiscard]] virtual absl::Status GemmBias(const GemmCall& g) {
    (void)g;
    return absl::UnimplementedError("GemmBias: no GEMM with a bias on this device");
  }
  // Whether GemmThenElementwise may take one launch where it would take two (for counts of
  // launches per round).
  virtual bool FusesGemmThenElementwise() const { return false; }

  // dst: [m, w] row i = src row idx[i], or zeros where idx[i] < 0.
  [[nodiscard]] virtual absl::Status GatherRows(const float* src, int64_t src_ld,
                                                const int32_t* idx, int64_t m, int64_t w,
                                                float* dst, int64_t dst_ld) = 0;
  // dst row idx[i] += src row i (skipped where idx[i] < 0). `unique`: no index repeats, so
  // no two rows collide (lets a device skip atomics).
  [[nodiscard]] virtual absl::Status ScatterAddRows(const float* src, int64_t src_ld,
                                                    const int32_t* idx, int64_t m, int64_t w,
                                                    float* dst, int64_t dst_ld, bool unique) = 0;

  // Several GatherRows over the same m rows, as one launch where the device can (a round's
  // gathers of every child slot and field). REQUIRES: 0 < count <= kMaxRowCopies.
  [[nodiscard]] virtual absl::Status GatherRowsMulti(const RowCopy* copies, int count, int64_t m) {
    for (int i = 0; i < count; ++i) {
      const RowCopy& c = copies[i];
      absl::Status s = GatherRows(c.src, c.src_ld, c.idx, m, c.w, c.dst, c.dst_ld);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // Several ScatterAddRows over the same m rows, as one launch where the device can.
  // `unique`: no destination element is written twice, across all the copies together.
  [[nodiscard]] virtual absl::Status ScatterAddRowsMulti(const RowCopy* copies, int count,
                                                         int64_t m, bool unique) {
    for (int i = 0; i < count; ++i) {
      const RowCopy& c = copies[i];
      absl::Status s = ScatterAddRows(c.src, c.src_ld, c.idx, m, c.w, c.dst, c.dst_ld, unique);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // dst: [m, w] row i = reduce over j in [offsets[i], offsets[i+1]) of src row ids[j]
  // (zeros for an empty segment). kMax writes the winning ids[j] per element into argmax
  // ([m, w], ld w). kMean divides by the segment length.
  [[nodiscard]] virtual absl::Status SegmentReduce(ReduceOp op, const float* src, int64_t src_ld,
                                                   const int32_t* offsets, const int32_t* ids,
                                                   int64_t m, int64_t w, float* dst, int64_t dst_ld,
                                                   int32_t* argmax) = 0;
  // The gradient of SegmentReduce: dsrc row ids[j] += dy row i (divided by the segment
  // length for kMean; only into the argmax row, per element, for kMax).
  [[nodiscard]] virtual absl::Status SegmentReduceGrad(ReduceOp op, const float* dy, int64_t dy_ld,
                                                       const int32_t* offsets, const int32_t* ids,
                                                       const int32_t* argmax, int64_t m, int64_t w,
                                                       float* dsrc, int64_t dsrc_ld) = 0;

  // Softmax cross-entropy over rows of logits: [n, c]. Rows with labels[i] < 0 are masked.
  // dlogits: [n, c] (ld c) = scale * (softmax - onehot) on labelled rows, 0 elsewhere.
  // stats: 2 floats on the device, accumulated: += Σ loss over labelled rows, += number of
  // labelled rows whose argmax equals the label. pred: [n] argmax per row (may be null).
  [[nodiscard]] virtual absl::Status SoftmaxCrossEntropy(const float* logits, int64_t ld, int64_t n,
                                                         int64_t c, const int32_t* labels,
                                                         float scale, float* dlogits, float* stats,
                                                         int32_t* pred) = 0;

  // dst: [w] += alpha * Σ_r src row r, src: [m, w].
  [[nodiscard]] virtual absl::Status ColumnSum(const float* src, int64_t ld, int64_t m, int64_t w,
                                               float alpha, float* dst) = 0;
  // dst: [w] += Σ_r x[r, c] * y[r, c].
  [[nodiscard]] virtual absl::Status ColumnDot(const float* x, int64_t x_ld, const float* y,
                                               int64_t y_ld, int64_t m, int64_t w, float* dst) = 0;
  // dst: [n] = 0.
  [[nodiscard]] virtual absl::Status Fill(float* dst, int64_t n, float value) = 0;
  // Waits for queued work.
  [[nodiscard]] virtual absl::Status Synchronize() = 0;

  // Queues the launches `queue` makes on this device as one unit of work, and returns whether
  // they went as one graph. By default it calls queue() (false). Where the device replays
  // captured work and the options ask for it (CUDA graphs, KernelOptions::cuda.graphs), the
  // launches are captured instead and launched as one graph (true): the host queues one launch
  // instead of one per kernel and the device runs the kernels back to back (the executable
  // graphs are kept per topology and updated in place for the next unit of that topology). A
  // launch that cannot be captured makes the whole unit go launch by launch (false). Either way
  // the device runs the same kernels in the same order: the results are bit-equal.
  [[nodiscard]] virtual absl::StatusOr<bool> QueueRecorded(
      const std::function<absl::Status()>& queue) {
    if (absl::Status s = queue(); !s.ok()) return s;
    return false;
  }
};

// The kernels of `device`, from its type's plug-in (ops/device_plugin.h); an error naming the
// device if this build or machine has none.
[[nodiscard]] absl::StatusOr<Kernels*> GetKernels(core::Device device);

// How every device's kernels run, for the whole process (the kernels are shared by every engine
// on a device): the CPU kernels and those of each device already in use take it now (Configure),
// kernels made later take it when they are made. Errors: the first a device's kernels returned
// (the others still took theirs); the options are kept either way.
[[nodiscard]] absl::Status SetKernelOptions(const KernelOptions& options);
// What SetKernelOptions last set (the defaults before).
KernelOptions GetKernelOptions();

// For a binary's main, once at start-up (never called by the library): where the environment
// sets any CAVS_* kernel variable (kernel_options.h), sets the process's options to
// GetKernelOptions() with those applied, and returns the line to print, "<program>: kernel
// options from the environment: CAVS_PACKED_GEMM=0 ... -> cpu{...} ..."; else changes nothing
// and returns "". Errors: SetKernelOptions's.
[[nodiscard]] absl::StatusOr<std::string> ApplyEnvironmentKernelOptions(const std::string& program);

}  // namespace cavs::ops
