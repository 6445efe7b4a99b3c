// Reproducible randomness, identical on every machine, compiler and standard library.
//
// The generator is Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11), implemented here rather than taken from <random>, whose distributions differ between
// standard libraries. Philox is counter-based: word `i` of the stream (seed, stream) is a pure
// function of the three numbers, so any element can be drawn independently (a CUDA dropout
// kernel and the CPU produce the same mask from (seed, counter)), and a stream's position is
// just an integer that a checkpoint can store.
//
// The generator itself is header-only and CUDA-compatible, in core/philox.h.
//
// Parameters are drawn from (seed, HashName(name)) only (FNV-1a, never absl::Hash, which is
// seeded per process), so their values do not depend on creation order, rank or machine.
//
// Thread-safety: the free functions are pure; an Rng object is not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/initializer.h"
#include "core/philox.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace cavs::core {

// FNV-1a, 64 bit: `h` (the hash so far; kFnv1aBasis to start) extended by `bytes`. The same in
// every process and on every machine, unlike absl::Hash.
inline constexpr uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;
constexpr uint64_t Fnv1a(std::string_view bytes, uint64_t h = kFnv1aBasis) {
  for (char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// A hash of a name: FNV-1a of its bytes.
constexpr uint64_t HashName(std::string_view name) { return Fnv1a(name); }

// A sequential reader of one Philox stream. Its whole state is (seed, stream, offset), where
// offset counts the 32-bit words drawn so far; State()/FromState() carry it through a
// checkpoint's metadata so that a resumed run draws the same numbers.
class Rng {
 public:
  explicit Rng(uint64_t seed, uint64_t stream = 0, uint64_t offset = 0)
      : seed_(seed), stream_(stream), offset_(offset) {}

  uint32_t NextU32();
  // Two words, the first one the low half.
  uint64_t NextU64();
  // Uniform in [0, 1).
  float Uniform() { return UniformFromBits(NextU32()); }
  // Uniform in [lo, hi) (lo itself when lo == hi). REQUIRES: lo <= hi, both finite.
  float Uniform(float lo, float hi);
  // Uniform integer in [0, n), unbiased (rejection sampling). REQUIRES: n > 0.
  uint64_t UniformInt(uint64_t n);
  // Fisher-Yates shuffle, the same permutation everywhere for the same state.
  template <typename T>
  void Shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) {
      std::swap(items[i - 1], items[UniformInt(i)]);
    }
  }

  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }
  uint64_t offset() const { return offset_; }

  // "philox:<seed>:<stream>:<offset>", and its inverse.
  std::string State() const;
  [[nodiscard]] static absl::StatusOr<Rng> FromState(absl::string_view state);

 private:
  uint64_t seed_;
  uint64_t stream_;
  uint64_t offset_;
  uint64_t cached_block_ = ~0ull;  // block index held in cache_, ~0 for none
  PhiloxBlock cache_{};
};

// lo + (hi - lo) * UniformFromBits(bits), kept below hi; the formula every fill uses.
float ScaleUniform(uint32_t bits, float lo, float hi);

// The Xavier/Glorot bound sqrt(6 / (fan_in + fan_out)): fan_in is the first dimension and
// fan_out the last (both the dimension for a rank-1 shape, both 1 for a scalar).
float XavierBound(const Shape& shape);

// Fills `t` (float32, any device) from `init`, drawing from the stream (seed, HashName(name))
// only. Errors: an undefined or non-float32 tensor, an invalid range (lo > hi, non-finite).
[[nodiscard]] absl::Status InitializeTensor(Tensor& t, const Initializer& init, uint64_t seed,
                                            const std::string& name);

}  // namespace cavs::core
