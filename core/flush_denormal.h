// ScopedFlushDenormal: while alive, the calling thread treats subnormal floats as zero (inputs,
// DAZ) and writes zero instead of a subnormal result (FTZ); the old mode is restored after.
//
// Why: on x86 every arithmetic instruction that meets a subnormal operand or result takes a
// microcode assist of about a hundred cycles. Training produces them: with L2 weight decay and
// Adagrad, a Tree-LSTM's x W columns for the forget gates (whose gradient is exactly zero on
// SST, where only leaves have tokens and leaves have no children) decay into the subnormal
// range within an epoch, and every later GEMM over W ran 6x slower (443 against 2,882 trees/s,
// bench/RESULTS.md). The CPU kernels and the CPU optimizer run under this guard, as TensorFlow's
// CPU executor and oneDNN do; values below 1.2e-38 then become 0, which no model here can see.
// The ops' pool workers set the mode once for good. Elsewhere (non-x86): no effect.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace cavs::core {

class ScopedFlushDenormal {
 public:
#if defined(__x86_64__) || defined(__i386__)
  static constexpr unsigned kFtzDaz = 0x8040;  // MXCSR bits 15 (FTZ) and 6 (DAZ)
  ScopedFlushDenormal() : saved_(_mm_getcsr()) {
    if ((saved_ & kFtzDaz) != kFtzDaz) _mm_setcsr(saved_ | kFtzDaz);
  }
  ~ScopedFlushDenormal() {
    if ((saved_ & kFtzDaz) != kFtzDaz) _mm_setcsr(saved_);
  }

 private:
  unsigned saved_;
#else
  ScopedFlushDenormal() = default;
#endif
 public:
  ScopedFlushDenormal(const ScopedFlushDenormal&) = delete;
  ScopedFlushDenormal& operator=(const ScopedFlushDenormal&) = delete;
};

// ScopedExactDenormal: the opposite, while alive: the calling thread reads and writes subnormal
// floats as they are (FTZ and DAZ cleared), for code whose bits must not depend on the caller's
// mode (the F16C conversions of distributed/half.h); the old mode is restored after.
class ScopedExactDenormal {
 public:
#if defined(__x86_64__) || defined(__i386__)
  ScopedExactDenormal() : saved_(_mm_getcsr()) {
    if (saved_ & ScopedFlushDenormal::kFtzDaz) _mm_setcsr(saved_ & ~ScopedFlushDenormal::kFtzDaz);
  }
  ~ScopedExactDenormal() {
    if (saved_ & ScopedFlushDenormal::kFtzDaz) _mm_setcsr(saved_);
  }

 private:
  unsigned saved_;
#else
  ScopedExactDenormal() = default;
#endif
 public:
  ScopedExactDenormal(const ScopedExactDenormal&) = delete;
  ScopedExactDenormal& operator=(const ScopedExactDenormal&) = delete;
};

// Sets the calling thread's mode for good (threads that only ever run kernels).
inline void FlushDenormalsForThisThread() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(_mm_getcsr() | ScopedFlushDenormal::kFtzDaz);
#endif
}

}  // namespace cavs::core
