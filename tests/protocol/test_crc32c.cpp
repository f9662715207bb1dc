// CRC32C through ISA-L: the standard CRC (init ~0, final xor ~0), checked against RFC 3720 B.4 and a bitwise
// reference implementation.
#include "protocol/crc32c.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

namespace rdmablk::protocol {
namespace {

// Bit-at-a-time CRC32C, reflected polynomial 0x82F63B78: the definition, independent of ISA-L.
uint32_t reference_crc32c(const uint8_t* p, std::size_t n) {
  uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

struct Vector {
  const char* name;
  std::vector<uint8_t> data;
  uint32_t crc;
};

std::vector<uint8_t> filled(std::size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }
std::vector<uint8_t> ramp(bool up) {
  std::vector<uint8_t> v(32);
  for (std::size_t i = 0; i < 32; ++i) v[i] = static_cast<uint8_t>(up ? i : 31 - i);
  return v;
}

TEST(Crc32c, Rfc3720AndCheckVectors) {
  const std::string_view check = "123456789";
  // RFC 3720 B.4 "iSCSI Read (10) command PDU": 48 bytes.
  std::vector<uint8_t> iscsi_read = {0x01, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                     0x14, 0, 0, 0, 0, 0, 0x04, 0, 0, 0, 0, 0x14, 0, 0, 0, 0x18,
                                     0x28, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<Vector> vectors = {
      {"check string", std::vector<uint8_t>(check.begin(), check.end()), 0xE3069283u},
      {"32 x 0x00", filled(32, 0x00), 0x8A9136AAu},
      {"32 x 0xFF", filled(32, 0xFF), 0x62A8AB43u},
      {"0..31", ramp(true), 0x46DD794Eu},
      {"31..0", ramp(false), 0x113FDB5Cu},
      {"iSCSI read PDU", iscsi_read, 0xD9963A56u},
  };
  for (const auto& v : vectors) {
    SCOPED_TRACE(v.name);
    EXPECT_EQ(crc32c(v.data.data(), v.data.size()), v.crc);
    EXPECT_EQ(crc32c(std::span<const uint8_t>(v.data)), v.crc);
    EXPECT_EQ(reference_crc32c(v.data.data(), v.data.size()), v.crc);  // the reference agrees too
    Crc32c inc;
    inc.update(v.data);
    EXPECT_EQ(inc.value(), v.crc);
  }
}

TEST(Crc32c, EmptyInputIsZero) {
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  Crc32c c;
  EXPECT_EQ(c.value(), 0u);
  c.update(nullptr, 0);
  EXPECT_EQ(c.value(), 0u);
}

TEST(Crc32c, MatchesBitwiseReferenceOnRandomBuffers) {
  std::mt19937 rng(7);
  for (std::size_t n : {1u, 2u, 3u, 7u, 8u, 15u, 16u, 63u, 64u, 65u, 255u, 256u, 1023u, 4096u, 5000u}) {
    std::vector<uint8_t> buf(n);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    SCOPED_TRACE(n);
    EXPECT_EQ(crc32c(buf.data(), buf.size()), reference_crc32c(buf.data(), buf.size()));
  }
}

TEST(Crc32c, IncrementalEqualsOneShotAtEverySplit) {
  std::vector<uint8_t> buf(300);
  std::mt19937 rng(11);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  const uint32_t whole = crc32c(buf.data(), buf.size());
  for (std::size_t a = 0; a <= buf.size(); a += 7) {
    for (std::size_t b = a; b <= buf.size(); b += 13) {
      Crc32c c;
      c.update(buf.data(), a);
      c.update(buf.data() + a, b - a);
      c.update(buf.data() + b, buf.size() - b);
      ASSERT_EQ(c.value(), whole) << "split " << a << "/" << b;
    }
  }
}

TEST(Crc32c, ExtendChainsFinishedCrcs) {
  const std::string_view s = "123456789";
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  for (std::size_t k = 0; k <= s.size(); ++k) {
    EXPECT_EQ(crc32c_extend(crc32c(p, k), p + k, s.size() - k), 0xE3069283u) << k;
  }
}

TEST(Crc32c, ValueDoesNotFinishAndResetRestarts) {
  const std::string_view s = "123456789";
  Crc32c c;
  c.update(s.data(), 4);
  const uint32_t partial = c.value();
  EXPECT_EQ(partial, crc32c(s.data(), 4));
  c.update(s.data() + 4, 5);  // value() did not disturb the running state
  EXPECT_EQ(c.value(), 0xE3069283u);
  c.reset();
  EXPECT_EQ(c.value(), 0u);
  c.update(s.data(), s.size());
  EXPECT_EQ(c.value(), 0xE3069283u);
}

}  // namespace
}  // namespace rdmablk::protocol
