// The saved reservation state (target/reservations/state_format.h): the byte layout, a round trip, every torn
// length and every flipped bit detected, a newer version told from damage.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "protocol/crc32c.h"
#include "protocol/endian.h"
#include "target/reservation_test_util.h"
#include "target/reservations/state_format.h"

namespace rdmablk::target::reservations::testing {
namespace {

ReservationState sample() {
  ReservationState s = held_by_a(RT::exclusive_access_registrants_only);
  s.generation = 0xA0B0C0D0;
  s.ptpl = true;
  return s;
}

uint32_t le32_at(const std::vector<uint8_t>& b, std::size_t off) {
  return protocol::load<protocol::le32>(&b[off]).get();
}

// The CRC field recomputed after a test edits the bytes, so that only the edit is wrong.
void reseal(std::vector<uint8_t>& b) {
  std::vector<uint8_t> copy = b;
  for (std::size_t i = 16; i < 20; ++i) copy.at(i) = 0;
  protocol::le32 crc{};
  crc.set(protocol::crc32c(copy));
  protocol::store(&b[16], crc);
}

// ---- the format ------------------------------------------------------------------------------------------------

TEST(ReservationStateFormatTest, TheLayoutIsPinned) {
  ReservationState s;
  s.generation = 0x0A0B0C0D;
  s.type = RT::write_exclusive;
  s.holder = kA;
  s.ptpl = true;
  s.registrants = {{kA, 0x1122334455667788}};
  const auto b = serialize_state(s);
  ASSERT_EQ(b.size(), 24u + 32u + 24u);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 8), "RBLKRESV");
  EXPECT_EQ(le32_at(b, 8), 1u);   // version
  EXPECT_EQ(le32_at(b, 12), 56u);  // payload length
  std::vector<uint8_t> zeroed = b;
  for (std::size_t i = 16; i < 20; ++i) zeroed.at(i) = 0;
  EXPECT_EQ(le32_at(b, 16), protocol::crc32c(zeroed));
  EXPECT_EQ(le32_at(b, 20), 0u);
  EXPECT_EQ(le32_at(b, 24), 0x0A0B0C0Du);
  EXPECT_EQ(b[28], 1);  // type
  EXPECT_EQ(b[29], 1);  // flags: PTPL
  EXPECT_TRUE(std::equal(kA.begin(), kA.end(), b.begin() + 32));
  EXPECT_EQ(le32_at(b, 48), 1u);  // count
  EXPECT_TRUE(std::equal(kA.begin(), kA.end(), b.begin() + 56));
  EXPECT_EQ(protocol::load<protocol::le64>(&b[72]).get(), 0x1122334455667788u);
}

TEST(ReservationStateFormatTest, StatesRoundTrip) {
  ReservationState all = held_by_a(RT::write_exclusive_all_registrants);
  all.generation = 7;
  for (const ReservationState& s : {ReservationState{}, sample(), all, three_registrants()}) {
    const auto parsed = parse_state(serialize_state(s));
    ASSERT_TRUE(parsed.has_value()) << parsed.error().detail;
    EXPECT_EQ(*parsed, s);
  }
}

// A torn write leaves a prefix: every prefix of a valid state is detected, as truncated.
TEST(ReservationStateFormatTest, EveryTruncationIsDetectedAsTorn) {
  const auto b = serialize_state(sample());
  for (std::size_t len = 0; len < b.size(); ++len) {
    const auto parsed = parse_state(std::span<const uint8_t>(b.data(), len));
    ASSERT_FALSE(parsed.has_value()) << len;
    EXPECT_EQ(parsed.error().problem, StateFormatProblem::truncated) << len << ": " << parsed.error().detail;
  }
}

TEST(ReservationStateFormatTest, EveryFlippedBitIsDetected) {
  const auto good = serialize_state(sample());
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      auto b = good;
      b[i] = static_cast<uint8_t>(b[i] ^ (1u << bit));
      EXPECT_FALSE(parse_state(b).has_value()) << "byte " << i << " bit " << bit;
    }
  }
}

TEST(ReservationStateFormatTest, TrailingBytesAndForeignFilesAreCorrupt) {
  auto b = serialize_state(sample());
  b.push_back(0);
  auto parsed = parse_state(b);
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().problem, StateFormatProblem::corrupt);
  const std::string text = "{\"registrants\": [], \"padding\": \"...................\"}";
  parsed = parse_state(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().problem, StateFormatProblem::corrupt);
}

// Whole and intact but newer: said apart from damage.
TEST(ReservationStateFormatTest, ANewerVersionIsUnsupported) {
  auto b = serialize_state(sample());
  protocol::le32 v{};
  v.set(2);
  protocol::store(&b[8], v);
  reseal(b);
  const auto parsed = parse_state(b);
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().problem, StateFormatProblem::unsupported_version);
}

// A checksum vouches for bytes, not for sense: a state the model cannot produce is refused too.
TEST(ReservationStateFormatTest, AnImpossibleStateIsCorrupt) {
  ReservationState s = sample();
  s.holder = kD;  // not a registrant
  const auto parsed = parse_state(serialize_state(s));
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().problem, StateFormatProblem::corrupt);
  auto b = serialize_state(sample());
  b[29] = 0x81;  // an unknown flag
  reseal(b);
  EXPECT_FALSE(parse_state(b).has_value());
}

}  // namespace
}  // namespace rdmablk::target::reservations::testing
