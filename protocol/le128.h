// 128-bit little-endian counters (SMART/health "data units read", Identify TNVMCAP/UNVMCAP, NVMCAP...).
// The spec stores them as 16 bytes, least significant first; every such field we use sits on an 8-byte
// boundary, so two le64 halves keep the struct naturally aligned.
#pragma once

#include <cstdint>

#include "protocol/endian.h"

namespace rdmablk::protocol {

struct le128 {
  le64 lo;  // bits 63:0
  le64 hi;  // bits 127:64
  constexpr uint64_t low() const noexcept { return lo.get(); }
  constexpr uint64_t high() const noexcept { return hi.get(); }
  constexpr void set(uint64_t low_bits, uint64_t high_bits = 0) noexcept {
    lo.set(low_bits);
    hi.set(high_bits);
  }
  // Adds with carry into the high half (SMART counters only grow).
  constexpr void add(uint64_t v) noexcept {
    uint64_t l = lo.get() + v;
    if (l < v) hi.set(hi.get() + 1);
    lo.set(l);
  }
  friend constexpr bool operator==(le128 a, le128 b) noexcept { return a.lo == b.lo && a.hi == b.hi; }
};
static_assert(sizeof(le128) == 16 && alignof(le128) == 8);

}  // namespace rdmablk::protocol
