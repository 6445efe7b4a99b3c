// PlanEwKernel (ops/ew_plan.h) without a GPU: a generated kernel runs a segment's
// instructions for each element in one thread, with no barrier inside the segment. This test
// executes plans the way such a kernel may run, every element a task and the tasks interleaved
// at random between any two instructions (barriers only between segments), reading each operand
// from where the plan says (memory or the shared row at the top of the element's body, as the
// emitted code does, or the register of an earlier instruction of the same element), and
// checks the result bit for bit against the plain row-by-row program.
// A plan that merged instructions one element of which reads what another element writes, or
// forwarded a value some other element overwrote, fails under some interleaving.
//
// The CUDA source the plans emit is compiled by NVRTC in cuda_fused_test.cc, and run on a GPU
// there against the CPU kernels.
#include "ops/cuda/ew_codegen.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/philox.h"
#include "core/random.h"
#include "gtest/gtest.h"
#include "tests/ops/ew_programs.h"

namespace cavs::ops {
namespace {

using cuda::EmitEwKernelCuda;
using cuda::EwKernelName;
using testing::EwProgram;
using testing::RandomProgram;
using testing::Scratch;
using testing::TreeLstmBackward;
using testing::TreeLstmForward;

constexpr int64_t kScratchCols = 4096;

float& Elem(const EwArg& x, std::vector<float>& scratch_row, int64_t row, int64_t c) {
  if (x.scratch >= 0) return scratch_row[x.scratch + c];
  return x.ptr[row * x.ld + c];
}

// The program's meaning: row by row, instruction by instruction, column by column.
void Reference(const EwProgram& p) {
  for (int64_t r = 0; r < p.rows; ++r) {
    std::vector<float> srow(kScratchCols, 0.0f);
    for (const EwInstr& in : p.instrs) {
      if (in.width <= 0) continue;
      if (in.op == EwOp::kSum) {
        float sum = 0.0f;
        for (int64_t c = 0; c < in.width; ++c) sum += Elem(in.a, srow, r, c);
        Elem(in.dst, srow, r, 0) = sum;
        continue;
      }
      if (in.a.rows != nullptr) {  // a pull from row rows[r] (0 if negative)
        for (int64_t c = 0; c < in.width; ++c) {
          const float v = in.a.rows[r] >= 0 ? in.a.ptr[in.a.rows[r] * in.a.ld + c] : 0.0f;
          float& d = Elem(in.dst, srow, r, c);
          d = in.op == EwOp::kAccumulate ? d + v : v;
        }
        continue;
      }
      if (in.dst.rows != nullptr) {  // a push into row rows[r] (none if negative)
        for (int64_t c = 0; c < in.width && in.dst.rows[r] >= 0; ++c) {
          in.dst.ptr[in.dst.rows[r] * in.dst.ld + c] = Elem(in.a, srow, r, c);
        }
        continue;
      }
      for (int64_t c = 0; c < in.width; ++c) {
        const float a =
            in.op == EwOp::kZero ? 0.0f : Elem(in.a, srow, r, in.op == EwOp::kBroadcast ? 0 : c);
        const float b = EwReadsB(in.op) ? Elem(in.b, srow, r, c) : 0.0f;
        const float d = in.op == EwOp::kAccumulate ? Elem(in.dst, srow, r, c) : 0.0f;
        Elem(in.dst, srow, r, c) = EwApplyOnHost(in, a, b, d, r, c);
      }
    }
  }
}

// Runs `plan` as a generated kernel may: see the file comment. `order`: 0 random interleaving,
// 1 each element's whole segment in element order, 2 the same in reverse element order.
void Simulate(const EwKernelPlan& plan, const EwProgram& p, core::Rng& rng, int order) {
  const EwInstr* prog = p.instrs.data();
  std::vector<std::vector<float>> shared(p.rows, std::vector<float>(plan.shared_width + 1, 0.0f));
  auto slot_arg = [&](int slot) -> const EwArg& {
    const EwPlanSlot& s = plan.slots[slot];
    const EwInstr& in = prog[s.program_index];
    return s.field == 0 ? in.dst : s.field == 1 ? in.a : in.b;
  };
  for (const EwPlanSegment& seg : plan.segments) {
    if (seg.row_sum) {
      const EwPlanInstr& pi = plan.instrs[seg.first];
      std::vector<int64_t> rows(p.rows);
      for (int64_t r = 0; r < p.rows; ++r) rows[r] = r;
      rng.Shuffle(rows);
      for (int64_t r : rows) {
        float sum = 0.0f;
        for (int64_t c = 0; c < seg.width; ++c) {
          sum += pi.a.source == EwSource::kMemory
                     ? slot_arg(pi.a.index).ptr[r * slot_arg(pi.a.index).ld + c]
                     : shared[r][pi.a.col + c];
        }
        if (pi.dst.source == EwSource::kMemory) {
          slot_arg(pi.dst.index).ptr[r * slot_arg(pi.dst.index).ld] = sum;
        } else {
          ASSERT_EQ(pi.dst.source, EwSource::kShared) << "a row sum's result crosses threads";
          shared[r][pi.dst.col] = sum;
        }
      }
      continue;
    }
    struct Task {
      int64_t row, c;
      int next;
      std::vector<float> regs;
      std::vector<std::array<float, 3>> loaded;  // a, b, dst_in of each instruction, if not regs
    };
    std::vector<Task> tasks;
    for (int64_t r = 0; r < p.rows; ++r) {
      for (int64_t c = 0; c < seg.width; ++c) {
        tasks.push_back({r, c, seg.first, std::vector<float>(plan.instrs.size(), NAN), {}});
      }
    }
    if (order == 2) std::reverse(tasks.begin(), tasks.end());
    auto read = [&](const EwPlanOperand& o, const Task& t, int64_t c) -> float {
      switch (o.source) {
        case EwSource::kMemory: {
          const EwArg& x = slot_arg(o.index);
          return x.ptr[t.row * x.ld + c];
        }
        case EwSource::kRegister:
          EXPECT_EQ(plan.instrs[o.index].segment, plan.instrs[t.next].segment);
          EXPECT_LT(o.index, t.next);
          return t.regs[o.index];
        case EwSource::kShared:
          return shared[t.row][o.col + c];
        case EwSource::kNone:
          break;
      }
      return 0.0f;
    };
    size_t live = tasks.size();
    while (live > 0) {
      // In order: the first live task runs to the end of the segment, then the next.
      const size_t pick = order == 0 ? rng.UniformInt(live) : 0;
      Task& t = tasks[pick];
      if (t.next == seg.first) {
        // As the generated kernel does: every operand not from a register is read at the top
        // of the element's body, before the segment's first store.
        t.loaded.assign(plan.instrs.size(), {NAN, NAN, NAN});
        for (int k = seg.first; k < seg.end; ++k) {
          const EwPlanInstr& pk = plan.instrs[k];
          const EwPlanOperand* ops[] = {&pk.a, &pk.b, &pk.dst_in};
          for (int o = 0; o < 3; ++o) {
            if (ops[o]->source == EwSource::kRegister) continue;
            if (o == 0 && pk.a_mapped) {
              const EwArg& x = slot_arg(pk.a.index);
              const int32_t from = prog[pk.program_index].a.rows[t.row];
              t.loaded[k][o] = from >= 0 ? x.ptr[from * x.ld + t.c] : 0.0f;
              continue;
            }
            const bool col0 = o == 0 && pk.op == EwOp::kBroadcast;
            t.loaded[k][o] = read(*ops[o], t, col0 ? 0 : t.c);
          }
        }
      }
      const EwPlanInstr& pi = plan.instrs[t.next];
      const EwInstr& in = prog[pi.program_index];
      auto operand = [&](const EwPlanOperand& o, int which) {
        return o.source == EwSource::kRegister ? read(o, t, t.c) : t.loaded[t.next][which];
      };
      const float a = operand(pi.a, 0);
      const float b = operand(pi.b, 1);
      const float d = operand(pi.dst_in, 2);
      const float v = EwApplyOnHost(in, a, b, d, t.row, t.c);
      t.regs[t.next] = v;
      if (pi.dst_mapped) {
        const EwArg& x = slot_arg(pi.dst.index);
        if (in.dst.rows[t.row] >= 0) x.ptr[in.dst.rows[t.row] * x.ld + t.c] = v;
      } else if (pi.dst.source == EwSource::kMemory) {
        const EwArg& x = slot_arg(pi.dst.index);
        x.ptr[t.row * x.ld + t.c] = v;
      } else if (pi.dst.source == EwSource::kShared) {
        shared[t.row][pi.dst.col + t.c] = v;
      } else {
        EXPECT_EQ(pi.dst.index, t.next);
      }
      if (++t.next == seg.end) {
        if (order == 0) {
          std::swap(tasks[pick], tasks[live - 1]);
        } else {
          std::rotate(tasks.begin(), tasks.begin() + 1, tasks.begin() + live);
        }
        --live;
      }
    }
  }
}

std::vector<std::vector<float>> Snapshot(const EwProgram& p) {
  std::vector<std::vector<float>> s;
  for (const auto& b : p.buffers) s.push_back(*b);
  return s;
}

void Restore(EwProgram& p, const std::vector<std::vector<float>>& s) {
  for (size_t i = 0; i < s.size(); ++i) *p.buffers[i] = s[i];
}

// The plan against the reference under several interleavings; returns the plan.
EwKernelPlan CheckPlan(EwProgram& p, core::Rng& rng, const std::string& what) {
  const EwKernelPlan plan =
      PlanEwKernel(p.instrs.data(), static_cast<int>(p.instrs.size()), p.rows);
  const auto before = Snapshot(p);
  Reference(p);
  const auto want = Snapshot(p);
  for (int trial = 0; trial < 5; ++trial) {
    Restore(p, before);
    Simulate(plan, p, rng, trial < 3 ? 0 : trial - 2);
    const auto got = Snapshot(p);
    for (size_t bi = 0; bi < got.size(); ++bi) {
      for (size_t i = 0; i < got[bi].size(); ++i) {
        // Bit for bit: both run the same scalar arithmetic per element.
        if (!(got[bi][i] == want[bi][i] || (std::isnan(got[bi][i]) && std::isnan(want[bi][i])))) {
          ADD_FAILURE() << what << ": buffer " << bi << " element " << i << " got " << got[bi][i]
                        << " want " << want[bi][i] << " (trial " << trial << ", "
                        << plan.segments.size() << " segments)";
          return plan;
        }
      }
    }
  }
  Restore(p, before);
  return plan;
}

TEST(EwCodegenTest, TreeLstmRoundsAreOneSegmentWithScratchInRegisters) {
  core::Rng rng(1);
  for (int64_t rows : {1, 5}) {
    EwProgram fwd = TreeLstmForward(6, rows, 2);
    const EwKernelPlan f = CheckPlan(fwd, rng, "forward");
    EXPECT_EQ(f.segments.size(), 1u);
    EXPECT_EQ(f.registers, 4);
    EXPECT_EQ(f.shared_width, 0);
    // Every value read back within the round comes from its register, never from memory.
    int forwarded = 0;
    for (const EwPlanInstr& pi : f.instrs) {
      for (const EwPlanOperand* o : {&pi.a, &pi.b}) forwarded += o->source == EwSource::kRegister;
    }
    EXPECT_EQ(forwarded, 11);  // f_r, f_l, i and u, the two sums' 4, c, o and tanh(c)
    EwProgram bwd = TreeLstmBackward(6, rows, 3);
    const EwKernelPlan b = CheckPlan(bwd, rng, "backward");
    EXPECT_EQ(b.segments.size(), 1u);
    EXPECT_EQ(b.registers, 9);
    EXPECT_EQ(b.shared_width, 0);
  }
}

// The key depends on how the pointers relate, not on where they are: every round of a schedule
// (new rows, new offsets into the arena) reuses one kernel.
TEST(EwCodegenTest, KeyIsTheSameForEveryRoundOfAShape) {
  EwProgram a = TreeLstmForward(150, 25, 4);
  EwProgram b = TreeLstmForward(150, 7, 5);
  const EwKernelPlan pa = PlanEwKernel(a.instrs.data(), static_cast<int>(a.instrs.size()), a.rows);
  const EwKernelPlan pb = PlanEwKernel(b.instrs.data(), static_cast<int>(b.instrs.size()), b.rows);
  EXPECT_EQ(pa.key, pb.key);
  EXPECT_EQ(EwKernelName(pa), EwKernelName(pb));
  EwProgram c = TreeLstmForward(64, 25, 4);  // another width: another kernel
  const EwKernelPlan pc = PlanEwKernel(c.instrs.data(), static_cast<int>(c.instrs.size()), c.rows);
  EXPECT_NE(pa.key, pc.key);
}

// The kernel's name, hence its source and its on-disk cache entry, is the same in every
// process: this binary is run twice and prints the Tree-LSTM forward kernel's name each time
// (absl::Hash, which named kernels before, is seeded per process: no entry was ever reused).
TEST(EwCodegenTest, KernelNamesAreTheSameInEveryProcess) {
  if (std::getenv("CAVS_PRINT_EW_NAME") != nullptr) {
    const EwProgram p = TreeLstmForward(150, 64, 1);
    const EwKernelPlan plan = PlanEwKernel(p.instrs.data(), static_cast<int>(p.instrs.size()), 64);
    std::printf("EW_NAME=%s\n", EwKernelName(plan).c_str());
    return;
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  auto name_in_a_new_process = [&self]() {
    const std::string cmd =
        "CAVS_PRINT_EW_NAME=1 '" + self +
        "' --gtest_filter=EwCodegenTest.KernelNamesAreTheSameInEveryProcess 2>&1";
    std::string out;
    if (FILE* f = popen(cmd.c_str(), "r")) {
      char buf[256];
      while (std::fgets(buf, sizeof(buf), f) != nullptr) out += buf;
      pclose(f);
    }
    const size_t at = out.find("EW_NAME=");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  const std::string first = name_in_a_new_process(), second = name_in_a_new_process();
  ASSERT_NE(first, "") << "the child process printed no name";
  EXPECT_EQ(first, second);
}

// Kernels::Elementwise's `shape`: programs of one shape must plan alike. Rounds of a step do; a
// program that reads another column under the same shape is caught; another fingerprint is
// another program (the shape is re-learned, as after a stale one).
TEST(EwCodegenTest, ShapeCheckerCatchesABrokenPromise) {
  EwShapeChecker checker;
  EwProgram a = TreeLstmBackward(150, 25, 1), b = TreeLstmBackward(150, 40, 2);
  EXPECT_TRUE(checker.Check(a.instrs.data(), static_cast<int>(a.instrs.size()), a.rows, 5).ok());
  EXPECT_TRUE(checker.Check(b.instrs.data(), static_cast<int>(b.instrs.size()), b.rows, 5).ok());
  core::Rng rng(2);
  EwProgram p;
  p.rows = 3;
  float* x = p.Buffer(3 * 8, rng);
  float* y = p.Buffer(3 * 8, rng);
  p.Add(EwOp::kTanh, 4, {x, 8}, {x, 8});
  p.Add(EwOp::kSigmoid, 4, {y, 8}, {x, 8});
  std::vector<EwInstr> q = p.instrs;
  q[1].a.ptr = x + 1;
  std::vector<int64_t> fp;
  EwFingerprint(p.instrs.data(), 2, p.rows, &fp);
  EXPECT_TRUE(EwFingerprintMatches(fp, q.data(), 2, p.rows));  // the fingerprint cannot tell
  EXPECT_FALSE(EwFingerprintMatches(fp, q.data(), 2, 1));      // one row is another shape
  EXPECT_TRUE(checker.Check(p.instrs.data(), 2, p.rows, 9).ok());
  EXPECT_EQ(checker.Check(q.data(), 2, p.rows, 9).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(checker.Check(a.instrs.data(), static_cast<int>(a.instrs.size()), a.rows, 9).ok());
  EXPECT_TRUE(checker.Check(q.data(), 2, p.rows, 0).ok());  // no shape, no promise
}

// A read one column to the side of a value written in the same program must see it written
// (another thread's element): the program splits there, and the value crosses in memory.
TEST(EwCodegenTest, ReadAcrossColumnsEndsTheSegment) {
  core::Rng rng(6);
  EwProgram p;
  p.rows = 3;
  float* x = p.Buffer(3 * 8, rng);
  float* y = p.Buffer(3 * 8, rng);
  p.Add(EwOp::kTanh, 4, {x, 8}, {y, 8});
  p.Add(EwOp::kSigmoid, 4, {y + 4, 8}, {x + 1, 8});  // column c + 1 of what tanh wrote
  const EwKernelPlan plan = CheckPlan(p, rng, "shifted read");
  ASSERT_EQ(plan.segments.size(), 2u);
  EXPECT_EQ(plan.instrs[1].a.source, EwSource::kMemory);
  // The same through scratch: the temporary then lives in the shared row.
  EwProgram q;
  q.rows = 3;
  float* u = q.Buffer(3 * 8, rng);
  float* v = q.Buffer(3 * 8, rng);
  q.Add(EwOp::kTanh, 4, Scratch(0), {u, 8});
  q.Add(EwOp::kSigmoid, 3, {v, 8}, Scratch(1));
  const EwKernelPlan qp = CheckPlan(q, rng, "shifted scratch read");
  ASSERT_EQ(qp.segments.size(), 2u);
  EXPECT_EQ(qp.instrs[0].dst.source, EwSource::kShared);
  EXPECT_EQ(qp.registers, 0);
  EXPECT_GE(qp.shared_width, 4);
}

// The shared row holds only what is read through it: register-resident temporaries at lower
// scratch columns take no room (they did: a temporary at column 3600 cost 14 KB a row).
TEST(EwCodegenTest, SharedRowsArePacked) {
  core::Rng rng(12);
  EwProgram p;
  p.rows = 4;
  float* x = p.Buffer(4 * 8, rng);
  float* y = p.Buffer(4 * 8, rng);
  for (int i = 0; i < 9; ++i) {
    p.Add(EwOp::kTanh, 4, Scratch(400 * i), {x, 8});
    p.Add(EwOp::kAccumulate, 4, {y, 8}, Scratch(400 * i));
  }
  p.Add(EwOp::kSigmoid, 4, Scratch(3600), {y, 8});
  p.Add(EwOp::kSum, 4, {y + 4, 8}, Scratch(3600));
  p.Add(EwOp::kSub, 2, {x + 4, 8}, Scratch(3601), Scratch(3600));
  const EwKernelPlan plan = CheckPlan(p, rng, "packed shared row");
  EXPECT_EQ(plan.registers, 9);
  EXPECT_EQ(plan.shared_width, 4);
  EXPECT_EQ(plan.segments.size(), 3u);
}

// A later instruction overwriting what an earlier one read from a neighbouring column (a write
// after read across threads) also splits.
TEST(EwCodegenTest, WriteOverAnotherElementsReadEndsTheSegment) {
  core::Rng rng(7);
  EwProgram p;
  p.rows = 2;
  float* x = p.Buffer(2 * 8, rng);
  float* y = p.Buffer(2 * 8, rng);
  p.Add(EwOp::kCopy, 4, {y, 8}, {x + 1, 8});
  p.Add(EwOp::kNeg, 4, {x, 8}, {y + 4, 8});
  const EwKernelPlan plan = CheckPlan(p, rng, "write after read");
  EXPECT_EQ(plan.segments.size(), 2u);
}

TEST(EwCodegenTest, SumAndBroadcastGetTheirOwnSegmentsWhereNeeded) {
  core::Rng rng(8);
  EwProgram p;
  p.rows = 5;
  float* x = p.Buffer(5 * 6, rng);
  float* y = p.Buffer(5 * 6, rng);
  p.Add(EwOp::kTanh, 4, Scratch(0), {x, 6});
  p.Add(EwOp::kSum, 4, Scratch(4), Scratch(0));
  p.Add(EwOp::kBroadcast, 4, {y, 6}, Scratch(4));
  p.Add(EwOp::kMul, 4, {y, 6}, {y, 6}, Scratch(0));
  const EwKernelPlan plan = CheckPlan(p, rng, "sum and broadcast");
  ASSERT_EQ(plan.segments.size(), 3u);
  EXPECT_TRUE(plan.segments[1].row_sum);
  EXPECT_EQ(plan.instrs[3].a.source, EwSource::kRegister);  // y: the broadcast's value
  EXPECT_EQ(plan.instrs[3].b.source, EwSource::kShared);    // tanh's, from segment 0
}

TEST(EwCodegenTest, RandomProgramsMatchTheRowByRowProgram) {
  core::Rng rng(9);
  int multi = 0, forwarded = 0, shared = 0, registers = 0, pushes = 0, pulls = 0;
  for (int i = 0; i < 400; ++i) {
    EwProgram p = RandomProgram(rng, 12);
    const EwKernelPlan plan = CheckPlan(p, rng, "random program " + std::to_string(i));
    if (HasFailure()) return;
    multi += plan.segments.size() > 1;
    for (const EwPlanInstr& pi : plan.instrs) {
      pushes += pi.dst_mapped;
      pulls += pi.a_mapped;
    }
    shared += plan.shared_width > 0;
    registers += plan.registers;
    for (const EwPlanInstr& pi : plan.instrs) {
      for (const EwPlanOperand* o : {&pi.a, &pi.b, &pi.dst_in}) {
        forwarded += o->source == EwSource::kRegister;
      }
    }
  }
  // The generator reaches every case the plan distinguishes.
  EXPECT_GT(multi, 50);
  EXPECT_GT(forwarded, 200);
  EXPECT_GT(shared, 20);
  EXPECT_GT(registers, 50);
  EXPECT_GT(pushes, 50);
  EXPECT_GT(pulls, 50);
}

// The emitted source names what the plan says: one loop per segment, barriers between them,
// scratch in registers declared nowhere in memory, Philox only with a dropout.
TEST(EwCodegenTest, EmittedSourceFollowsThePlan) {
  EwProgram fwd = TreeLstmForward(150, 25, 10);
  const EwKernelPlan plan =
      PlanEwKernel(fwd.instrs.data(), static_cast<int>(fwd.instrs.size()), fwd.rows);
  const std::string src = EmitEwKernelCuda(plan, EwKernelName(plan));
  EXPECT_NE(src.find(EwKernelName(plan)), std::string::npos);
  EXPECT_EQ(src.find("__syncthreads"), std::string::npos);
  EXPECT_EQ(src.find("shared"), std::string::npos);
  EXPECT_EQ(src.find("philox"), std::string::npos);
  EXPECT_NE(src.find("e < nr * 150"), std::string::npos);
  core::Rng rng(11);
  EwProgram q;
  q.rows = 2;
  float* x = q.Buffer(2 * 8, rng);
  q.uids = {3, 4};
  q.Add(EwOp::kTanh, 4, Scratch(0), {x, 8});
  q.Add(EwOp::kSum, 4, {x + 4, 8}, Scratch(0));
  q.Add(EwOp::kDropout, 4, {x, 8}, {x, 8});
  q.instrs.back().scalar = 0.5f;
  q.instrs.back().uids = q.uids.data();
  const EwKernelPlan qp = PlanEwKernel(q.instrs.data(), 3, q.rows);
  const std::string qs = EmitEwKernelCuda(qp, "k");
  EXPECT_NE(qs.find("#include \"core/philox.h\""), std::string::npos);
  EXPECT_NE(qs.find("CAVS_EW_SHARED(shared);"), std::string::npos);
  EXPECT_NE(qs.find("__shfl_xor_sync"), std::string::npos);
  EXPECT_EQ(qp.segments.size(), 3u);
}

}  // namespace
}  // namespace cavs::ops
