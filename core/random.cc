// Built with -ffp-contract=off (core/CMakeLists.txt): ScaleUniform's multiply-add must round
// twice on every target, or an FMA-capable compiler would draw different parameters.
#include "core/random.h"

#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace cavs::core {

uint32_t Rng::NextU32() {
  const uint64_t block = offset_ >> 2;
  if (block != cached_block_) {
    cache_ = PhiloxStreamBlock(seed_, stream_, block);
    cached_block_ = block;
  }
  return cache_.v[offset_++ & 3];
}

uint64_t Rng::NextU64() {
  const uint64_t lo = NextU32();
  const uint64_t hi = NextU32();
  return lo | (hi << 32);
}

float Rng::Uniform(float lo, float hi) { return ScaleUniform(NextU32(), lo, hi); }

uint64_t Rng::UniformInt(uint64_t n) {
  CAVS_CHECK(n > 0, "UniformInt(0)");
  if (n <= (1ull << 32)) {
    // Accept the largest multiple of n below 2^32; reject (rarely) the remainder.
    const uint64_t limit = (1ull << 32) - (1ull << 32) % n;
    for (;;) {
      const uint64_t x = NextU32();
      if (x < limit) return x % n;
    }
  }
  const uint64_t limit = ~0ull - (~0ull % n + 1) % n;  // draws in [0, limit] are unbiased
  for (;;) {
    const uint64_t x = NextU64();
    if (x <= limit) return x % n;
  }
}

std::string Rng::State() const {
  return absl::StrCat("philox:", seed_, ":", stream_, ":", offset_);
}

absl::StatusOr<Rng> Rng::FromState(absl::string_view state) {
  std::vector<absl::string_view> parts = absl::StrSplit(state, ':');
  uint64_t seed = 0, stream = 0, offset = 0;
  if (parts.size() != 4 || parts[0] != "philox" || !absl::SimpleAtoi(parts[1], &seed) ||
      !absl::SimpleAtoi(parts[2], &stream) || !absl::SimpleAtoi(parts[3], &offset)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid RNG state '", state, "': expected philox:<seed>:<stream>:<offset>"));
  }
  return Rng(seed, stream, offset);
}

float ScaleUniform(uint32_t bits, float lo, float hi) {
  const float u = UniformFromBits(bits);
  const float scaled = (hi - lo) * u;
  const float v = lo + scaled;
  // Rounding can land on hi itself; the interval is half-open everywhere.
  return v < hi ? v : (lo < hi ? std::nextafter(hi, lo) : lo);
}

float XavierBound(const Shape& shape) {
  const double fan_in = shape.rank() == 0 ? 1.0 : static_cast<double>(shape.dim(0));
  const double fan_out = shape.rank() == 0 ? 1.0 : static_cast<double>(shape.dim(shape.rank() - 1));
  if (fan_in + fan_out <= 0) return 0.0f;
  // sqrt is correctly rounded (IEEE 754), so the bound is the same everywhere.
  return static_cast<float>(std::sqrt(6.0 / (fan_in + fan_out)));
}

namespace {

absl::Status CheckRange(float lo, float hi, const std::string& name) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", name, "': invalid uniform range [", lo, ", ", hi, ")"));
  }
  return absl::OkStatus();
}

// Host values of `init` for `numel` elements of `shape`.
absl::StatusOr<std::vector<float>> DrawValues(const Initializer& init, const Shape& shape,
                                              uint64_t seed, const std::string& name) {
  const size_t n = static_cast<size_t>(shape.NumElements());
  float lo = 0.0f, hi = 0.0f;
  switch (init.kind) {
    case Initializer::Kind::kZeros:
      return std::vector<float>(n, 0.0f);
    case Initializer::Kind::kConstant:
      if (!std::isfinite(init.a)) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter '", name, "': non-finite constant ", init.a));
      }
      return std::vector<float>(n, init.a);
    case Initializer::Kind::kUniform:
      lo = init.a;
      hi = init.b;
      break;
    case Initializer::Kind::kXavierUniform:
      hi = XavierBound(shape);
      lo = -hi;
      break;
  }
  CAVS_RETURN_IF_ERROR(CheckRange(lo, hi, name));
  std::vector<float> values(n);
  const uint64_t stream = HashName(name);
  for (size_t i = 0; i < n; i += 4) {
    const PhiloxBlock block = PhiloxStreamBlock(seed, stream, i / 4);
    for (size_t lane = 0; lane < 4 && i + lane < n; ++lane) {
      values[i + lane] = ScaleUniform(block.v[lane], lo, hi);
    }
  }
  return values;
}

}  // namespace

absl::Status InitializeTensor(Tensor& t, const Initializer& init, uint64_t seed,
                              const std::string& name) {
  if (!t.defined() || t.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", name, "': can only initialize a defined float32 tensor, got ",
                     t.defined() ? t.DebugString() : std::string("an undefined tensor")));
  }
  CAVS_ASSIGN_OR_RETURN(std::vector<float> values, DrawValues(init, t.shape(), seed, name));
  if (t.device().is_cpu()) {
    if (!values.empty()) std::copy(values.begin(), values.end(), t.data<float>());
    return absl::OkStatus();
  }
  return t.CopyFrom(Tensor::FromVector(values, t.shape()));
}

}  // namespace cavs::core
