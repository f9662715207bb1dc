// Little-endian wire integers. NVMe and NVMe-oF are little-endian on the wire; these wrappers keep the
// byte order explicit in every struct so that a field can only be read through get() / set().
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace rdmablk::protocol {

namespace detail {
template <typename T>
constexpr T to_from_le(T v) noexcept {
  if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1) {
    return v;
  } else {
    // std::byteswap is C++23 (and a qualified name is looked up even in a discarded branch), so swap by
    // hand; unreachable on the little-endian targets we build for.
    T out{};
    for (std::size_t i = 0; i < sizeof(T); ++i) out = static_cast<T>(out << 8 | ((v >> (8 * i)) & 0xFF));
    return out;
  }
}
}  // namespace detail

// Naturally aligned little-endian integer (the common case: the spec aligns most fields).
template <typename T>
struct le {
  static_assert(std::is_unsigned_v<T>);
  T raw;
  constexpr T get() const noexcept { return detail::to_from_le(raw); }
  constexpr void set(T v) noexcept { raw = detail::to_from_le(v); }
  friend constexpr bool operator==(le a, le b) noexcept { return a.raw == b.raw; }
};
using le16 = le<uint16_t>;
using le32 = le<uint32_t>;
using le64 = le<uint64_t>;

// Unaligned little-endian integer of N bytes (N <= 8), for the few fields the spec does not align:
// the 24-bit length and the 32-bit key at offset 11 of a keyed SGL data block, for example.
template <std::size_t N>
struct le_bytes {
  static_assert(N >= 1 && N <= 8);
  std::array<uint8_t, N> b;
  constexpr uint64_t get() const noexcept {
    uint64_t v = 0;
    for (std::size_t i = 0; i < N; ++i) v |= uint64_t{b[i]} << (8 * i);
    return v;
  }
  constexpr void set(uint64_t v) noexcept {
    for (std::size_t i = 0; i < N; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
  }
  static constexpr uint64_t max() noexcept { return N == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * N)) - 1; }
};
using le24 = le_bytes<3>;
using le32u = le_bytes<4>;  // unaligned 32-bit

static_assert(sizeof(le16) == 2 && alignof(le16) == 2);
static_assert(sizeof(le32) == 4 && alignof(le32) == 4);
static_assert(sizeof(le64) == 8 && alignof(le64) == 8);
static_assert(sizeof(le24) == 3 && alignof(le24) == 1);
static_assert(std::is_trivially_copyable_v<le64> && std::is_trivially_copyable_v<le24>);

// Copy a wire struct out of a (possibly unaligned) receive buffer. The caller checks the length first.
template <typename T>
inline T load(const void* src) noexcept {
  static_assert(std::is_trivially_copyable_v<T>);
  T out;
  std::memcpy(&out, src, sizeof(T));
  return out;
}

// Copy a wire struct into a (possibly unaligned) send buffer.
template <typename T>
inline void store(void* dst, const T& v) noexcept {
  static_assert(std::is_trivially_copyable_v<T>);
  std::memcpy(dst, &v, sizeof(T));
}

// Fixed-width, space- or NUL-padded ASCII fields (serial number, model, NQN, traddr...).
template <std::size_t N>
inline void set_padded(std::array<char, N>& field, const char* s, std::size_t len, char pad) noexcept {
  std::size_t n = len < N ? len : N;
  std::memcpy(field.data(), s, n);
  std::memset(field.data() + n, pad, N - n);
}

}  // namespace rdmablk::protocol
