// Deterministic pseudo-random bytes for data-path tests (xorshift32 from the seed): the same seed gives the
// same bytes in every suite, so a mismatch names what was written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdmablk::testing {

inline std::vector<uint8_t> pattern(std::size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

}  // namespace rdmablk::testing
