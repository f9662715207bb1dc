// verify=crc32c data pattern for `rdmablk bench`. Every block written carries a 32-byte header
//   0 magic "RDBKVRFY" | 8 namespace byte offset | 16 seed (per run of a job) | 24 block length |
//   28 CRC32C over the rest of the block (bytes 0-27 and 32-end)
// and a body that a PRNG seeded with (seed, offset) regenerates, so a mismatch is located to the byte
// without keeping a copy of what was written.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace rdmablk::initiator::bench {

inline constexpr std::size_t kVerifyHeaderSize = 32;
inline constexpr uint64_t kVerifyMagic = 0x594652564B424452ull;  // "RDBKVRFY" little-endian

void fill_verify_block(std::span<uint8_t> block, uint64_t offset, uint64_t seed) noexcept;

struct VerifyFailure {
  uint64_t offset = 0;  // namespace byte offset of the first bad byte
  uint8_t expected = 0;
  uint8_t actual = 0;
  const char* what = "";
};

// Checks a block read from namespace byte `offset`. `seed`: the seed this run wrote with, or nullopt to
// accept any writer's seed (read jobs verifying data written earlier).
std::optional<VerifyFailure> check_verify_block(std::span<const uint8_t> block, uint64_t offset,
                                                std::optional<uint64_t> seed) noexcept;

std::string describe(const VerifyFailure& f, uint64_t block_offset, std::size_t block_len);

}  // namespace rdmablk::initiator::bench
