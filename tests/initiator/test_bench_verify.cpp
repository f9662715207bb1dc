#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstring>
#include <string>
#include <vector>

#include "initiator/bench/verify.h"

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

// ----- Verifier: every kind, verify_interval, verify_pattern -----

namespace {

constexpr VerifyKind kHeaderKinds[] = {VerifyKind::crc32c, VerifyKind::md5, VerifyKind::sha1, VerifyKind::sha256,
                                       VerifyKind::meta};
constexpr VerifyKind kAllKinds[] = {VerifyKind::crc32c, VerifyKind::md5,  VerifyKind::sha1,
                                    VerifyKind::sha256, VerifyKind::meta, VerifyKind::pattern};

const char* name(VerifyKind k) {
  switch (k) {
    case VerifyKind::crc32c: return "crc32c";
    case VerifyKind::md5: return "md5";
    case VerifyKind::sha1: return "sha1";
    case VerifyKind::sha256: return "sha256";
    case VerifyKind::meta: return "meta";
    case VerifyKind::pattern: return "pattern";
    default: return "none";
  }
}

std::vector<uint8_t> pattern_for(VerifyKind k) {
  return k == VerifyKind::pattern ? std::vector<uint8_t>{0xaa, 0x55, 0x5a} : std::vector<uint8_t>{};
}

}  // namespace

TEST(Verifier, RoundTripsForEveryKindBlockAndInterval) {
  for (VerifyKind k : kAllKinds)
    for (std::size_t len : {512u, 1000u, 4096u, 4096u + 16u, 65536u})
      for (uint64_t interval : {0u, 512u, 4096u})
        for (bool with_pattern : {false, true}) {
          auto pattern = with_pattern ? std::vector<uint8_t>{1, 2, 3, 4, 5} : pattern_for(k);
          if (pattern.empty() && k == VerifyKind::pattern) continue;
          auto v = Verifier::create(k, pattern, interval);
          ASSERT_TRUE(v) << v.error().message;
          std::vector<uint8_t> blk(len, 0xee);
          const uint64_t off = 7 * 65536;
          v->fill(blk, off, 99);
          SCOPED_TRACE(::testing::Message() << name(k) << " len " << len << " interval " << interval << " pattern " << with_pattern);
          EXPECT_FALSE(v->check(blk, off, 99));
          EXPECT_FALSE(v->check(blk, off, std::nullopt));
          // The same data again (fill is a function of offset and seed only).
          std::vector<uint8_t> again(len, 0x11);
          v->fill(again, off, 99);
          EXPECT_EQ(blk, again);
        }
}

TEST(Verifier, VerifyPatternIsTheBodyOfChecksumKinds) {
  const std::vector<uint8_t> pat{0xde, 0xad, 0xbe, 0xef, 0x01};
  for (VerifyKind k : kHeaderKinds) {
    Verifier v(k, pat, 0);
    std::vector<uint8_t> blk(4096);
    v.fill(blk, 0, 1);
    const std::size_t h = Verifier::header_size(k);
    for (std::size_t i = h; i < blk.size(); ++i) ASSERT_EQ(blk[i], pat[i % pat.size()]) << name(k) << " byte " << i;
  }
  Verifier p(VerifyKind::pattern, pat, 0);
  std::vector<uint8_t> blk(1000);
  p.fill(blk, 12345, 1);
  for (std::size_t i = 0; i < blk.size(); ++i) ASSERT_EQ(blk[i], pat[i % pat.size()]);
}

TEST(Verifier, CorruptBodyIsLocatedToTheByte) {
  for (VerifyKind k : kAllKinds) {
    Verifier v(k, pattern_for(k), 4096);
    std::vector<uint8_t> blk(16384);
    const uint64_t off = 1 << 20;
    v.fill(blk, off, 5);
    const std::size_t at = 2 * 4096 + 777;  // the third chunk's body
    const uint8_t before = blk[at];
    blk[at] ^= 0x40;
    auto f = v.check(blk, off, 5);
    SCOPED_TRACE(name(k));
    if (k == VerifyKind::meta) {  // meta checks headers only (fio's verify=meta)
      EXPECT_FALSE(f);
      continue;
    }
    ASSERT_TRUE(f);
    EXPECT_EQ(f->offset, off + at);
    EXPECT_EQ(f->expected, before);
    EXPECT_EQ(f->actual, static_cast<uint8_t>(before ^ 0x40));
    if (k != VerifyKind::pattern) {
      EXPECT_EQ(f->chunk_offset, off + 2 * 4096);
      EXPECT_EQ(f->chunk_len, 4096u);
      EXPECT_EQ(std::string(f->what), std::string(name(k)) + " mismatch");
      auto msg = describe(*f, off, blk.size());
      EXPECT_NE(msg.find(std::string(name(k)) + " mismatch at byte offset " + std::to_string(off + at)), std::string::npos) << msg;
      EXPECT_NE(msg.find("chunk at offset " + std::to_string(off + 2 * 4096)), std::string::npos) << msg;
    } else {
      EXPECT_STREQ(f->what, "pattern mismatch");
    }
  }
}

TEST(Verifier, CorruptHeaderFieldsAreLocated) {
  const uint64_t off = 3 * 8192;
  for (VerifyKind k : kHeaderKinds) {
    Verifier v(k, {}, 0);
    std::vector<uint8_t> good(8192);
    v.fill(good, off, 0x1234);
    SCOPED_TRACE(name(k));
    auto flip = [&](std::size_t at, std::optional<uint64_t> seed) {
      auto blk = good;
      blk[at] ^= 0x01;
      auto f = v.check(blk, off, seed);
      EXPECT_TRUE(f) << "byte " << at;
      return f ? *f : VerifyFailure{};
    };
    auto magic = flip(3, 0x1234);
    EXPECT_EQ(magic.offset, off + 3);
    EXPECT_NE(std::string(magic.what).find("bad magic"), std::string::npos);
    auto where = flip(9, 0x1234);
    EXPECT_EQ(where.offset, off + 9);
    EXPECT_STREQ(where.what, "header names another offset (misplaced write)");
    auto length = flip(25, 0x1234);
    EXPECT_EQ(length.offset, off + 25);
    auto seed = flip(17, 0x1234);
    EXPECT_EQ(seed.offset, off + 17);
    EXPECT_STREQ(seed.what, "stale data: written by another run (seed)");
    auto crc = flip(29, 0x1234);
    EXPECT_EQ(crc.offset, off + 29);
    EXPECT_EQ(crc.expected, static_cast<uint8_t>(good[29]));
    if (k == VerifyKind::crc32c) {
      EXPECT_STREQ(crc.what, "crc32c mismatch in the header's CRC field");
    } else {
      EXPECT_STREQ(crc.what, "header CRC mismatch (the header is corrupted)");
      // Any-seed mode: a corrupted seed is caught by the header CRC.
      auto any = flip(18, std::nullopt);
      EXPECT_EQ(any.offset, off + 28);
      EXPECT_STREQ(any.what, "header CRC mismatch (the header is corrupted)");
    }
    const std::size_t dlen = Verifier::header_size(k) - kVerifyHeaderSize;
    if (dlen) {
      auto dig = flip(kVerifyHeaderSize + dlen - 1, 0x1234);  // last digest byte
      EXPECT_EQ(dig.offset, off + kVerifyHeaderSize + dlen - 1);
      EXPECT_EQ(dig.expected, good[kVerifyHeaderSize + dlen - 1]);
      EXPECT_EQ(std::string(dig.what), std::string(name(k)) + " mismatch in the stored digest");
    }
  }
}

TEST(Verifier, DataWrittenElsewhereOrByAnotherKindIsCaught) {
  for (VerifyKind k : kHeaderKinds) {
    Verifier v(k, {}, 4096);
    std::vector<uint8_t> blk(8192);
    v.fill(blk, 40960, 8);
    SCOPED_TRACE(name(k));
    auto f = v.check(blk, 40960 + 4096, 8);  // the same data at the next chunk's place
    ASSERT_TRUE(f);
    EXPECT_STREQ(f->what, "header names another offset (misplaced write)");
    EXPECT_EQ(f->chunk_offset, 40960u + 4096);
    auto g = v.check(blk, 0, std::nullopt);
    ASSERT_TRUE(g);
    EXPECT_STREQ(g->what, "header names another offset (misplaced write)");
    // Another kind reads it: the magic names the writer's kind.
    VerifyKind other = k == VerifyKind::md5 ? VerifyKind::sha1 : VerifyKind::md5;
    auto w = Verifier(other, {}, 4096).check(blk, 40960, 8);
    ASSERT_TRUE(w);
    EXPECT_NE(std::string(w->what).find(std::string("written with verify=") + name(k)), std::string::npos) << w->what;
  }
  std::vector<uint8_t> zero(4096, 0);
  auto z = Verifier(VerifyKind::sha256, {}, 0).check(zero, 0, std::nullopt);
  ASSERT_TRUE(z);
  EXPECT_NE(std::string(z->what).find("never written"), std::string::npos);
}

TEST(Verifier, AnySeedAcceptsEveryWriterButAGivenSeedMustMatch) {
  for (VerifyKind k : kHeaderKinds) {
    Verifier v(k, {}, 1024);
    std::vector<uint8_t> blk(4096);
    v.fill(blk, 8192, 111);
    EXPECT_FALSE(v.check(blk, 8192, std::nullopt)) << name(k);
    EXPECT_FALSE(v.check(blk, 8192, 111)) << name(k);
    auto f = v.check(blk, 8192, 112);
    ASSERT_TRUE(f) << name(k);
    EXPECT_EQ(f->offset, 8192u + 16);
  }
  // pattern has no seed: any data that is the pattern passes.
  Verifier p(VerifyKind::pattern, {7}, 0);
  std::vector<uint8_t> blk(512, 7);
  EXPECT_FALSE(p.check(blk, 0, 3));
}

TEST(Verifier, ShortTailJoinsTheLastChunk) {
  Verifier v(VerifyKind::md5, {}, 4096);
  std::vector<uint8_t> blk(4096 + 16);  // 16 bytes cannot hold a 48-byte header
  v.fill(blk, 0, 1);
  EXPECT_FALSE(v.check(blk, 0, 1));
  blk[4096 + 10] ^= 1;
  auto f = v.check(blk, 0, 1);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->offset, 4096u + 10);
  EXPECT_EQ(f->chunk_len, 4096u + 16);
}

TEST(Verifier, CreateRejectsWhatCannotWork) {
  EXPECT_FALSE(Verifier::create(VerifyKind::pattern, {}, 0));
  auto small = Verifier::create(VerifyKind::sha256, {}, 32);
  ASSERT_FALSE(small);
  EXPECT_NE(small.error().message.find("header (64 bytes)"), std::string::npos) << small.error().message;
  EXPECT_TRUE(Verifier::create(VerifyKind::sha256, {}, 64));
  Verifier none(VerifyKind::none, {}, 0);
  std::vector<uint8_t> blk(512, 3);
  none.fill(blk, 0, 0);
  EXPECT_EQ(blk, std::vector<uint8_t>(512, 3));
  EXPECT_FALSE(none.check(blk, 0, 0));
  EXPECT_EQ(Verifier::header_size(VerifyKind::md5), 48u);
  EXPECT_EQ(Verifier::header_size(VerifyKind::sha1), 52u);
  EXPECT_EQ(Verifier::header_size(VerifyKind::crc32c), 32u);
  EXPECT_EQ(Verifier::header_size(VerifyKind::pattern), 0u);
}

TEST(Verifier, FreeFunctionsAreTheOneChunkCrc32cFormat) {
  std::vector<uint8_t> a(4096), b(4096);
  fill_verify_block(a, 4096, 9);
  Verifier v(VerifyKind::crc32c, {}, 0);
  v.fill(b, 4096, 9);
  EXPECT_EQ(a, b);
  EXPECT_EQ(std::memcmp(a.data(), "RDBKVRFY", 8), 0);
}

TEST(Verifier, DigestsAreOpenSslsOverHeaderAndBody) {
  // The stored digest is the plain md5/sha1/sha256 of header bytes 0-27 followed by the body.
  for (auto [k, md] : {std::pair{VerifyKind::md5, EVP_md5()}, std::pair{VerifyKind::sha1, EVP_sha1()},
                       std::pair{VerifyKind::sha256, EVP_sha256()}}) {
    Verifier v(k, {}, 1024);
    std::vector<uint8_t> blk(2048);
    v.fill(blk, 1 << 30, 77);
    const std::size_t h = Verifier::header_size(k);
    for (std::size_t chunk = 0; chunk < 2048; chunk += 1024) {
      std::vector<uint8_t> msg(blk.begin() + static_cast<long>(chunk), blk.begin() + static_cast<long>(chunk + 28));
      msg.insert(msg.end(), blk.begin() + static_cast<long>(chunk + h), blk.begin() + static_cast<long>(chunk + 1024));
      unsigned char d[EVP_MAX_MD_SIZE];
      unsigned n = 0;
      ASSERT_EQ(EVP_Digest(msg.data(), msg.size(), d, &n, md, nullptr), 1);
      EXPECT_EQ(n, h - kVerifyHeaderSize);
      EXPECT_EQ(std::memcmp(d, blk.data() + chunk + kVerifyHeaderSize, n), 0) << name(k) << " chunk " << chunk;
    }
  }
}
