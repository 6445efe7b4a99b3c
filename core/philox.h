// Philox4x32-10, header-only, for the host compiler and nvcc alike (CAVS_HOST_DEVICE, plain
// uint32/uint64 arithmetic, no std:: calls and no other includes), so that a CUDA kernel and the
// CPU draw identical bits from the same (seed, stream, index). core/random.h builds the host-side
// API (Rng, InitializeTensor) on top.
//
// Layout of one draw: the 128-bit Philox counter is (block_lo, block_hi, stream_lo, stream_hi),
// the 64-bit key is (seed_lo, seed_hi); word `index` of a stream is lane index % 4 of block
// index / 4. Floats in [0, 1) are (bits >> 8) * 2^-24, exact in float32.
#pragma once

#include <stdint.h>

#include "core/host_device.h"

namespace cavs::core {

namespace philox_internal {
constexpr uint32_t kM0 = 0xD2511F53u;  // round multipliers
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;  // Weyl key increments (golden ratio, sqrt(3) - 1)
constexpr uint32_t kW1 = 0xBB67AE85u;
}  // namespace philox_internal

// A 128-bit Philox counter or output block.
struct PhiloxBlock {
  uint32_t v[4];
};

// Philox4x32 with 10 rounds: the block for `counter` under key (k0, k1).
CAVS_HOST_DEVICE inline PhiloxBlock Philox4x32_10(PhiloxBlock counter, uint32_t k0, uint32_t k1) {
  using namespace philox_internal;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * counter.v[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * counter.v[2];
    PhiloxBlock next;
    next.v[0] = static_cast<uint32_t>(p1 >> 32) ^ counter.v[1] ^ k0;
    next.v[1] = static_cast<uint32_t>(p1);
    next.v[2] = static_cast<uint32_t>(p0 >> 32) ^ counter.v[3] ^ k1;
    next.v[3] = static_cast<uint32_t>(p0);
    counter = next;
  }
  return counter;
}

// Block `block` of the stream (seed, stream).
CAVS_HOST_DEVICE inline PhiloxBlock PhiloxStreamBlock(uint64_t seed, uint64_t stream,
                                                      uint64_t block) {
  PhiloxBlock counter;
  counter.v[0] = static_cast<uint32_t>(block);
  counter.v[1] = static_cast<uint32_t>(block >> 32);
  counter.v[2] = static_cast<uint32_t>(stream);
  counter.v[3] = static_cast<uint32_t>(stream >> 32);
  return Philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Word `index` of the stream (seed, stream).
CAVS_HOST_DEVICE inline uint32_t PhiloxBits(uint64_t seed, uint64_t stream, uint64_t index) {
  return PhiloxStreamBlock(seed, stream, index >> 2).v[index & 3];
}

// The fixed bits-to-float formula: the top 24 bits scaled by 2^-24, in [0, 1), exact.
CAVS_HOST_DEVICE inline float UniformFromBits(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

// Element `counter` of stream 0 under `seed`: what a dropout kernel uses per element.
CAVS_HOST_DEVICE inline uint32_t PhiloxUniformBits(uint64_t seed, uint64_t counter) {
  return PhiloxBits(seed, 0, counter);
}
CAVS_HOST_DEVICE inline float PhiloxUniform(uint64_t seed, uint64_t counter) {
  return UniformFromBits(PhiloxUniformBits(seed, counter));
}

}  // namespace cavs::core
