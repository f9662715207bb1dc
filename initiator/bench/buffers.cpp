#include "initiator/bench/buffers.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "initiator/bench/mix.h"

namespace rdmablk::initiator::bench {

namespace {

constexpr std::size_t kScrambleBlock = 4096;

}  // namespace

BufferFiller::BufferFiller(const JobSpec& spec, uint64_t seed)
    : pattern_(spec.buffer_pattern), seed_(seed), rng_(mix64(seed ^ 0xB0FFE25ull)) {
  const unsigned pct = std::min(spec.buffer_compress_percentage, 100u);
  if (pct > 0 && pct < 100) {
    content_ = Content::compressible;
    compress_percent_ = pct;
    compress_chunk_ = static_cast<std::size_t>(spec.buffer_compress_chunk);
    refill_ = true;  // fio turns refill_buffers on for a compress percentage
  } else if (!pattern_.empty()) {
    content_ = Content::pattern;
  } else if (spec.zero_buffers || pct == 100) {
    content_ = Content::zeros;
  }
  refill_ = refill_ || spec.refill_buffers;
  // fio scrambles unless told zero_buffers, refills anyway, or shapes the data for compression.
  scramble_ = spec.scramble_buffers && !refill_ && !spec.zero_buffers && pct == 0;
}

void BufferFiller::random_bytes(uint8_t* p, std::size_t n) noexcept {
  // Four independent xorshift64 lanes seeded from the job's generator: no multiply and no dependency
  // between lanes, so a 4 KiB refill costs a few hundred ns. Incompressible, which is all it must be.
  std::array<uint64_t, 4> s{rng_.next() | 1, rng_.next() | 1, rng_.next() | 1, rng_.next() | 1};
  auto step = [](uint64_t x) noexcept {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (std::size_t l = 0; l < 4; ++l) s[l] = step(s[l]);
    std::memcpy(p + i, s.data(), 32);
  }
  for (std::size_t l = 0; i < n; ++l) {
    s[l] = step(s[l]);
    const std::size_t k = std::min<std::size_t>(8, n - i);
    std::memcpy(p + i, &s[l], k);
    i += k;
  }
}

void BufferFiller::fixed_bytes(uint8_t* p, std::size_t n) const noexcept {
  if (pattern_.empty()) {
    std::memset(p, 0, n);
    return;
  }
  // The pattern once, then double what is there.
  std::size_t have = std::min(n, pattern_.size());
  std::memcpy(p, pattern_.data(), have);
  while (have < n) {
    const std::size_t k = std::min(have, n - have);
    std::memcpy(p + have, p, k);
    have += k;
  }
}

void BufferFiller::restore(std::span<uint8_t> buf) noexcept {
  uint8_t* p = buf.data();
  const std::size_t n = buf.size();
  switch (content_) {
    case Content::random:
      random_bytes(p, n);
      return;
    case Content::zeros:
    case Content::pattern:
      fixed_bytes(p, n);
      return;
    case Content::compressible: {
      // fio's fill_random_buf_percentage: per chunk (100-P)% random, then P% fixed.
      const std::size_t chunk = compress_chunk_ && compress_chunk_ < n ? compress_chunk_ : n;
      const std::size_t random_part = chunk * (100 - compress_percent_) / 100;
      for (std::size_t at = 0; at < n; at += chunk) {
        const std::size_t len = std::min(chunk, n - at);
        const std::size_t r = std::min(random_part, len);
        random_bytes(p + at, r);
        fixed_bytes(p + at + r, len - r);
      }
      return;
    }
  }
}

void BufferFiller::initial_fill(std::span<uint8_t> all, std::size_t buffer_size) noexcept {
  const std::size_t step = buffer_size ? buffer_size : all.size();
  for (std::size_t at = 0; at < all.size(); at += step) restore(all.subspan(at, std::min(step, all.size() - at)));
}

void BufferFiller::scramble(std::span<uint8_t> buf) noexcept {
  if (buf.size() < 8) return;
  // One word per 4 KiB at a cache line that changes with every write; the value is unique per write and
  // per 4 KiB (a counter through a bijective mix).
  const uint64_t w = mix64(seed_ ^ (++writes_ * kGoldenGamma));
  const std::size_t line = static_cast<std::size_t>(w >> 58) * 64;  // 0..4032
  uint64_t v = w;
  for (std::size_t at = 0; at < buf.size(); at += kScrambleBlock) {
    const std::size_t len = std::min(kScrambleBlock, buf.size() - at);
    if (len < 8) break;  // a tail shorter than a word (only with odd buffer sizes)
    const std::size_t pos = len >= line + 8 ? line : (len - 8) & ~std::size_t{7};
    std::memcpy(buf.data() + at + pos, &v, 8);
    v += 0xD1B54A32D192ED03ull;
  }
}

void BufferFiller::fill(std::span<uint8_t> buf) noexcept {
  if (refill_) {
    restore(buf);
  } else if (scramble_) {
    scramble(buf);
  }
}

}  // namespace rdmablk::initiator::bench
