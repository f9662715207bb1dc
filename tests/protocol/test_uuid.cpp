// UUIDs and NGUIDs as text (protocol/uuid.h): what the target's config and the initiator accept and print.
#include "protocol/uuid.h"

#include <gtest/gtest.h>

namespace rdmablk::protocol {
namespace {

constexpr Id128 kId = {0x3f, 0x25, 0x04, 0xe0, 0x4f, 0x89, 0x11, 0xd3, 0x9a, 0x0c, 0x03, 0x05, 0xe8, 0x2c, 0x33, 0x01};

TEST(Uuid, ParsesTheCanonicalFormInEitherCase) {
  EXPECT_EQ(parse_uuid("3f2504e0-4f89-11d3-9a0c-0305e82c3301"), kId);
  EXPECT_EQ(parse_uuid("3F2504E0-4F89-11D3-9A0C-0305E82C3301"), kId);
  EXPECT_TRUE(is_canonical_uuid("3f2504e0-4f89-11d3-9a0c-0305e82c3301"));
}

TEST(Uuid, RefusesOtherLayouts) {
  for (const char* bad : {"", "3f2504e04f8911d39a0c0305e82c3301", "3f2504e0-4f89-11d3-9a0c-0305e82c330",
                          "3f2504e0-4f89-11d3-9a0c-0305e82c33011", "3f2504e04-f89-11d3-9a0c-0305e82c3301",
                          "3f2504e0-4f89-11d3-9a0c-0305e82c330g", "3f2504e0-4f89-11d3-9a0c+0305e82c3301"}) {
    EXPECT_FALSE(parse_uuid(bad)) << bad;
  }
}

TEST(Uuid, OrHexAlsoTakesThirtyTwoPlainDigits) {
  EXPECT_EQ(parse_uuid_or_hex("3f2504e04f8911d39a0c0305e82c3301"), kId);
  EXPECT_EQ(parse_uuid_or_hex("3f2504e0-4f89-11d3-9a0c-0305e82c3301"), kId);
  // Dashes elsewhere, or too few digits, are neither form.
  EXPECT_FALSE(parse_uuid_or_hex("3f2504e04f89-11d3-9a0c-0305e82c3301"));
  EXPECT_FALSE(parse_uuid_or_hex("3f25-04e04f8911d39a0c0305e82c3301"));
  EXPECT_FALSE(parse_uuid_or_hex("3f2504e04f8911d39a0c0305e82c330"));
}

TEST(Uuid, HexIdTakesDashesAnywhere) {
  EXPECT_EQ(parse_hex_id("3f2504e04f8911d39a0c0305e82c3301"), kId);
  EXPECT_EQ(parse_hex_id("3f25-04e0-4f8911d3-9a0c0305e82c-3301"), kId);
  EXPECT_FALSE(parse_hex_id("3f2504e04f8911d39a0c0305e82c33011"));
  EXPECT_FALSE(parse_hex_id("3f2504e04f8911d39a0c0305e82c330"));
  EXPECT_FALSE(parse_hex_id("3f2504e04f8911d39a0c0305e82c330x"));
}

TEST(Uuid, FormatsInLowerCase) {
  EXPECT_EQ(format_uuid(kId), "3f2504e0-4f89-11d3-9a0c-0305e82c3301");
  EXPECT_EQ(format_hex_id(kId), "3f2504e04f8911d39a0c0305e82c3301");
  EXPECT_EQ(parse_uuid(format_uuid(kId)), kId);
}

TEST(Uuid, AllZero) {
  EXPECT_TRUE(all_zero(Id128{}));
  EXPECT_FALSE(all_zero(kId));
}

}  // namespace
}  // namespace rdmablk::protocol
