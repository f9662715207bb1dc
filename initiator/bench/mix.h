// splitmix64 (Steele, Lea and Flood; Vigna's constants): how the bench derives seeds and mixes values, in
// one place so that the I/O generator, the buffer contents and the start delays mix alike.
#pragma once

#include <cstdint>

namespace rdmablk::initiator::bench {

// The golden-ratio increment of splitmix64's state.
inline constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;

// splitmix64's finalizer: every input bit reaches every output bit.
constexpr uint64_t mix64(uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The next value of the generator whose state is `x` (advanced).
constexpr uint64_t splitmix64(uint64_t& x) noexcept { return mix64(x += kGoldenGamma); }

}  // namespace rdmablk::initiator::bench
