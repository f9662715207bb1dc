#include <gtest/gtest.h>

#include <vector>

#include "initiator/bench_verify.h"

using namespace rdmablk::initiator::bench;

TEST(VerifyPattern, RoundTripsAndIsRecomputable) {
  std::vector<uint8_t> a(4096), b(4096);
  fill_verify_block(a, 1 << 20, 0xABCDEF);
  fill_verify_block(b, 1 << 20, 0xABCDEF);
  EXPECT_EQ(a, b);
  EXPECT_FALSE(check_verify_block(a, 1 << 20, 0xABCDEF));
  EXPECT_FALSE(check_verify_block(a, 1 << 20, std::nullopt));
  fill_verify_block(b, 1 << 20, 0xABCDEE);
  EXPECT_NE(a, b);
  std::vector<uint8_t> odd(1000);  // not a multiple of 8
  fill_verify_block(odd, 512, 9);
  EXPECT_FALSE(check_verify_block(odd, 512, 9));
}

TEST(VerifyPattern, CorruptionIsReportedAtItsByteOffset) {
  std::vector<uint8_t> blk(4096);
  const uint64_t off = 5 * 4096;
  fill_verify_block(blk, off, 77);
  uint8_t before = blk[1234];
  blk[1234] ^= 0x10;
  auto f = check_verify_block(blk, off, 77);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->offset, off + 1234);
  EXPECT_EQ(f->expected, before);
  EXPECT_EQ(f->actual, static_cast<uint8_t>(before ^ 0x10));
  EXPECT_STREQ(f->what, "crc32c mismatch");
  auto msg = describe(*f, off, blk.size());
  EXPECT_NE(msg.find("at byte offset 21714"), std::string::npos) << msg;
}

TEST(VerifyPattern, MisplacedStaleAndUnwrittenBlocks) {
  std::vector<uint8_t> blk(4096);
  fill_verify_block(blk, 8192, 1);
  auto misplaced = check_verify_block(blk, 12288, 1);
  ASSERT_TRUE(misplaced);
  EXPECT_STREQ(misplaced->what, "header names another offset (misplaced write)");
  EXPECT_EQ(misplaced->offset, 12288u + 9);  // 8192 vs 12288 differ first in byte 1 of the field

  auto stale = check_verify_block(blk, 8192, 2);
  ASSERT_TRUE(stale);
  EXPECT_STREQ(stale->what, "stale data: written by another run (seed)");
  EXPECT_EQ(stale->offset, 8192u + 16);

  std::vector<uint8_t> zero(4096, 0);
  auto unwritten = check_verify_block(zero, 0, std::nullopt);
  ASSERT_TRUE(unwritten);
  EXPECT_EQ(unwritten->offset, 0u);
  EXPECT_NE(std::string(unwritten->what).find("never written"), std::string::npos);
}
