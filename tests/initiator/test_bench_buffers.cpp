#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "initiator/bench/buffers.h"

using namespace rdmablk::initiator::bench;

namespace {

// zlib's compress2 (deflate, as gzip), loaded at run time so the tests need no link dependency.
std::optional<double> deflate_ratio(const std::vector<uint8_t>& data) {
  static void* lib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::nullopt;
  using Compress2 = int (*)(unsigned char*, unsigned long*, const unsigned char*, unsigned long, int);
  using Bound = unsigned long (*)(unsigned long);
  Compress2 compress2 = nullptr;
  Bound bound = nullptr;
  void* c = dlsym(lib, "compress2");
  void* b = dlsym(lib, "compressBound");
  if (!c || !b) return std::nullopt;
  std::memcpy(&compress2, &c, sizeof c);
  std::memcpy(&bound, &b, sizeof b);
  unsigned long out_len = bound(data.size());
  std::vector<unsigned char> out(out_len);
  if (compress2(out.data(), &out_len, data.data(), data.size(), 6) != 0) return std::nullopt;
  return static_cast<double>(out_len) / static_cast<double>(data.size());
}

JobSpec spec() {
  JobSpec j;
  j.rw = RwMode::write;
  return j;
}

std::size_t differing(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

}  // namespace

TEST(BufferFiller, DefaultIsRandomAndScrambledPerWrite) {
  BufferFiller f(spec(), 1);
  EXPECT_EQ(f.content(), BufferFiller::Content::random);
  EXPECT_TRUE(f.scrambles());
  EXPECT_FALSE(f.refills());
  EXPECT_TRUE(f.refill_each_write());
  std::vector<uint8_t> all(64 * 4096);
  f.initial_fill(all, 4096);
  if (auto r = deflate_ratio(all)) {
    EXPECT_GT(*r, 0.99);  // random data does not compress
  }
  // A scramble writes one word per 4 KiB: consecutive writes of one 4k buffer differ in at most 16 bytes.
  std::vector<uint8_t> buf(all.begin(), all.begin() + 4096);
  for (int i = 0; i < 100; ++i) {
    auto before = buf;
    f.fill(buf);
    EXPECT_LE(differing(before, buf), 16u);
    EXPECT_GT(differing(before, buf), 0u);
  }
  // No two 4 KiB blocks written from one 64k buffer over 500 writes are alike.
  std::vector<uint8_t> big(all.begin(), all.begin() + 65536);
  std::set<std::string> blocks;
  const int writes = 500;
  for (int w = 0; w < writes; ++w) {
    f.fill(big);
    for (std::size_t at = 0; at < big.size(); at += 4096)
      blocks.emplace(reinterpret_cast<const char*>(big.data() + at), 4096);
  }
  EXPECT_EQ(blocks.size(), static_cast<std::size_t>(writes) * 16);
  // Odd sizes: a short buffer and a tail shorter than 4 KiB are scrambled in bounds.
  std::vector<uint8_t> small(20), odd(4096 + 100);
  for (int i = 0; i < 100; ++i) {
    f.fill(small);
    f.fill(odd);
  }
}

TEST(BufferFiller, ScrambleOffLeavesBuffersAlone) {
  auto j = spec();
  j.scramble_buffers = false;
  BufferFiller f(j, 1);
  EXPECT_FALSE(f.refill_each_write());
  std::vector<uint8_t> buf(8192);
  f.initial_fill(buf);
  auto before = buf;
  f.fill(buf);
  EXPECT_EQ(buf, before);
}

TEST(BufferFiller, ZeroBuffers) {
  auto j = spec();
  j.zero_buffers = true;
  BufferFiller f(j, 1);
  EXPECT_EQ(f.content(), BufferFiller::Content::zeros);
  EXPECT_FALSE(f.refill_each_write());  // zero_buffers turns scrambling off (fio)
  std::vector<uint8_t> buf(10000, 0xff);
  f.initial_fill(buf);
  EXPECT_EQ(buf, std::vector<uint8_t>(10000, 0));
  j.buffer_compress_percentage = 100;  // fio: the same as zero_buffers
  j.zero_buffers = false;
  BufferFiller c(j, 1);
  EXPECT_EQ(c.content(), BufferFiller::Content::zeros);
  EXPECT_FALSE(c.refill_each_write());
}

TEST(BufferFiller, BufferPatternStartsAtEveryBuffer) {
  auto j = spec();
  j.buffer_pattern = {'a', 'b', 'c'};
  j.scramble_buffers = false;
  BufferFiller f(j, 1);
  EXPECT_EQ(f.content(), BufferFiller::Content::pattern);
  std::vector<uint8_t> all(3 * 4096);
  f.initial_fill(all, 4096);  // 4096 is not a multiple of 3: each buffer restarts the pattern
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t i = 0; i < 4096; ++i) ASSERT_EQ(all[b * 4096 + i], "abc"[i % 3]) << b << " " << i;
  j.scramble_buffers = true;  // fio scrambles pattern buffers too
  BufferFiller s(j, 1);
  EXPECT_TRUE(s.refill_each_write());
  std::vector<uint8_t> buf(all.begin(), all.begin() + 4096);
  auto before = buf;
  s.fill(buf);
  EXPECT_NE(buf, before);
  s.restore(buf);
  EXPECT_EQ(buf, before);
}

TEST(BufferFiller, RefillGivesNewDataEveryWrite) {
  auto j = spec();
  j.refill_buffers = true;
  BufferFiller f(j, 1);
  EXPECT_TRUE(f.refill_each_write());
  EXPECT_FALSE(f.scrambles());
  std::vector<uint8_t> buf(4096);
  f.initial_fill(buf);
  for (int i = 0; i < 10; ++i) {
    auto before = buf;
    f.fill(buf);
    EXPECT_GT(differing(before, buf), 4000u);
  }
  // Deterministic per seed.
  BufferFiller a(j, 5), b(j, 5);
  std::vector<uint8_t> x(4096), y(4096);
  a.initial_fill(x);
  b.initial_fill(y);
  EXPECT_EQ(x, y);
}

TEST(BufferFiller, CompressPercentageShapesEveryChunk) {
  auto j = spec();
  j.buffer_compress_percentage = 50;
  j.buffer_compress_chunk = 512;
  BufferFiller f(j, 3);
  EXPECT_EQ(f.content(), BufferFiller::Content::compressible);
  EXPECT_TRUE(f.refills());  // fio: a compress percentage implies refill_buffers
  EXPECT_FALSE(f.scrambles());
  std::vector<uint8_t> buf(8192);
  f.initial_fill(buf);
  for (std::size_t c = 0; c < buf.size(); c += 512) {
    EXPECT_FALSE(std::all_of(buf.begin() + static_cast<long>(c), buf.begin() + static_cast<long>(c + 256), [](uint8_t b) { return b == 0; }));
    EXPECT_TRUE(std::all_of(buf.begin() + static_cast<long>(c + 256), buf.begin() + static_cast<long>(c + 512), [](uint8_t b) { return b == 0; }));
  }
  // The fixed part is buffer_pattern when there is one.
  j.buffer_pattern = {0x5a};
  BufferFiller p(j, 3);
  p.fill(buf);
  EXPECT_EQ(buf[300], 0x5a);
  EXPECT_EQ(buf[511], 0x5a);
}

TEST(BufferFiller, WrittenRegionCompressesToAboutThePercentage) {
  if (!deflate_ratio(std::vector<uint8_t>(4096))) GTEST_SKIP() << "libz.so.1 not loadable";
  for (unsigned pct : {25u, 50u, 75u, 90u}) {
    for (uint64_t chunk : {512u, 4096u, 0u}) {
      auto j = spec();
      j.buffer_compress_percentage = pct;
      j.buffer_compress_chunk = chunk;
      BufferFiller f(j, pct);
      // 4 MiB written as 256 writes of one 16k buffer (refilled before each).
      std::vector<uint8_t> region, buf(16384);
      for (int w = 0; w < 256; ++w) {
        f.fill(buf);
        region.insert(region.end(), buf.begin(), buf.end());
      }
      auto r = deflate_ratio(region);
      ASSERT_TRUE(r);
      const double want = (100.0 - pct) / 100.0;
      EXPECT_NEAR(*r, want, 0.04) << "compress " << pct << "% chunk " << chunk;
    }
  }
}

// No assertion on speed: prints what a scramble and a refill cost for the report.
TEST(BufferFiller, PrintNsPerWrite) {
  auto time = [](BufferFiller& f, std::vector<uint8_t>& buf, int n) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) f.fill(buf);
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
  };
  BufferFiller scr(spec(), 1);
  auto rj = spec();
  rj.refill_buffers = true;
  BufferFiller ref(rj, 1);
  std::vector<uint8_t> b4(4096), b128(131072);
  std::printf("[ns per write] scramble 4k %.1f, 128k %.1f; refill 4k %.1f, 128k %.1f\n", time(scr, b4, 200000),
              time(scr, b128, 20000), time(ref, b4, 20000), time(ref, b128, 2000));
}
