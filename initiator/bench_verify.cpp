#include "initiator/bench_verify.h"

#include <fmt/format.h>

#include <cstring>

#include "protocol/crc32c.h"

namespace rdmablk::initiator::bench {

namespace {

struct Prng {  // xorshift64*, seeded so that no (seed, offset) pair gives the all-zero state
  uint64_t s;
  Prng(uint64_t seed, uint64_t offset) noexcept : s((seed ^ (offset * 0x9E3779B97F4A7C15ull)) | 1) {}
  uint64_t next() noexcept {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
};

uint64_t get64(const uint8_t* p) noexcept {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t get32(const uint8_t* p) noexcept {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

uint32_t block_crc(std::span<const uint8_t> block) noexcept {
  protocol::Crc32c crc;
  crc.update(block.data(), 28);
  crc.update(block.data() + kVerifyHeaderSize, block.size() - kVerifyHeaderSize);
  return crc.value();
}

}  // namespace

void fill_verify_block(std::span<uint8_t> block, uint64_t offset, uint64_t seed) noexcept {
  if (block.size() < kVerifyHeaderSize) return;
  uint8_t* p = block.data();
  const uint64_t magic = kVerifyMagic;
  const uint32_t len = static_cast<uint32_t>(block.size());
  std::memcpy(p, &magic, 8);
  std::memcpy(p + 8, &offset, 8);
  std::memcpy(p + 16, &seed, 8);
  std::memcpy(p + 24, &len, 4);
  Prng rng(seed, offset);
  std::size_t i = kVerifyHeaderSize;
  for (; i + 8 <= block.size(); i += 8) {
    uint64_t v = rng.next();
    std::memcpy(p + i, &v, 8);
  }
  if (i < block.size()) {
    uint64_t v = rng.next();
    std::memcpy(p + i, &v, block.size() - i);
  }
  uint32_t crc = block_crc(block);
  std::memcpy(p + 28, &crc, 4);
}

std::optional<VerifyFailure> check_verify_block(std::span<const uint8_t> block, uint64_t offset,
                                                std::optional<uint64_t> seed) noexcept {
  const uint8_t* p = block.data();
  auto fail = [&](std::size_t at, uint8_t expected, const char* what) {
    return VerifyFailure{offset + at, expected, p[at], what};
  };
  if (block.size() < kVerifyHeaderSize) return fail(0, 0, "block shorter than the verify header");
  if (get64(p) != kVerifyMagic) {
    bool zero = true;
    for (uint8_t b : block) zero = zero && b == 0;
    return fail(0, static_cast<uint8_t>(kVerifyMagic), zero ? "bad magic header (block reads as zeroes: never written?)"
                                                            : "bad magic header");
  }
  if (get64(p + 8) != offset) {
    // Which byte of the offset field differs first.
    std::size_t at = 8;
    while (at < 16 && p[at] == static_cast<uint8_t>(offset >> (8 * (at - 8)))) ++at;
    return fail(at, static_cast<uint8_t>(offset >> (8 * (at - 8))), "header names another offset (misplaced write)");
  }
  if (get32(p + 24) != block.size()) return fail(24, static_cast<uint8_t>(block.size()), "header names another block length");
  uint64_t writer_seed = get64(p + 16);
  if (seed && writer_seed != *seed) {
    std::size_t at = 16;
    while (at < 24 && p[at] == static_cast<uint8_t>(*seed >> (8 * (at - 16)))) ++at;
    return fail(at, static_cast<uint8_t>(*seed >> (8 * (at - 16))), "stale data: written by another run (seed)");
  }
  if (block_crc(block) == get32(p + 28)) return std::nullopt;
  // CRC mismatch: regenerate the body to find the first bad byte.
  Prng rng(writer_seed, offset);
  for (std::size_t i = kVerifyHeaderSize; i < block.size(); i += 8) {
    uint64_t v = rng.next();
    for (std::size_t b = 0; b < 8 && i + b < block.size(); ++b) {
      auto expected = static_cast<uint8_t>(v >> (8 * b));
      if (p[i + b] != expected) return fail(i + b, expected, "crc32c mismatch");
    }
  }
  return fail(28, 0, "crc32c mismatch in the header's CRC field");
}

std::string describe(const VerifyFailure& f, uint64_t block_offset, std::size_t block_len) {
  return fmt::format("verify: {} at byte offset {} (block at offset {}, length {}): expected 0x{:02x}, got 0x{:02x}",
                     f.what, f.offset, block_offset, block_len, f.expected, f.actual);
}

}  // namespace rdmablk::initiator::bench
