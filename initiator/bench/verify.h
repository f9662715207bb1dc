// Data verification for `rdmablk bench` (fio's verify=crc32c|md5|sha1|sha256|meta|pattern, verify_pattern,
// verify_interval).
//
// A block is cut into chunks of verify_interval bytes (0 or more than the block: one chunk; a last piece
// too short for a header joins the chunk before it). Every chunk except with verify=pattern starts with a
// header
//   0 magic "RDBKVRF" + a kind letter (Y crc32c, M md5, S sha1, H sha256, T meta) | 8 namespace byte offset
//   of the chunk | 16 seed (per run of a job) | 24 chunk length (u32) | 28 CRC32C (u32) | 32 digest
//   (md5: 16 bytes, sha1: 20, sha256: 32; none for crc32c and meta)
// followed by the body: data a PRNG seeded with (seed, chunk offset) regenerates, or verify_pattern when
// it is set (fio does the same), repeated from the start of the block. A mismatch is therefore located to
// the byte without keeping a copy of what was written.
//   crc32c: the CRC covers the whole chunk except the CRC field (the format of the first version: a
//           one-chunk crc32c block is byte for byte what fill_verify_block() always wrote).
//   md5/sha1/sha256: the CRC covers header bytes 0-27; the digest covers bytes 0-27 and the body.
//   meta:   the CRC covers header bytes 0-27; the body is not checked (fio's verify=meta).
//   pattern: no header; the block must be verify_pattern repeated from its first byte (a misplaced or
//           stale block is not detectable).
// Digests come from OpenSSL's EVP interface, one context per Verifier. (OpenSSL 3.0's
// EVP_DigestInit_ex re-creates the provider's context, one small malloc per chunk digest; later 3.x
// releases reuse it.)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "initiator/bench/job_file.h"
#include "protocol/result.h"

struct evp_md_st;
struct evp_md_ctx_st;

namespace rdmablk::initiator::bench {

inline constexpr std::size_t kVerifyHeaderSize = 32;              // the fixed part of every header
inline constexpr uint64_t kVerifyMagic = 0x594652564B424452ull;  // "RDBKVRFY" little-endian (crc32c)

struct VerifyFailure {
  uint64_t offset = 0;  // namespace byte offset of the first bad byte
  uint8_t expected = 0;
  uint8_t actual = 0;
  const char* what = "";
  uint64_t chunk_offset = 0;  // namespace offset and length of the verify_interval chunk it is in
  uint64_t chunk_len = 0;
};

// "verify: md5 mismatch at byte offset X (block at offset B, length L[, chunk at offset C, length N]):
// expected 0x.., got 0x..".
std::string describe(const VerifyFailure& f, uint64_t block_offset, std::size_t block_len);

class Verifier {
 public:
  // interval 0 = whole block. verify_pattern empty with kind pattern: a zero byte. An interval below
  // header_size(kind) is raised to it; create() reports these instead, and a digest OpenSSL cannot
  // provide (the constructor's Verifier then fails every check with that reason).
  Verifier(VerifyKind kind, std::vector<uint8_t> pattern, uint64_t interval);
  static Result<Verifier> create(VerifyKind kind, std::vector<uint8_t> pattern, uint64_t interval);
  static Result<Verifier> create(const JobSpec& spec) {
    return create(spec.verify, spec.verify_pattern, spec.verify_interval);
  }
  ~Verifier();
  Verifier(Verifier&&) noexcept;
  Verifier& operator=(Verifier&&) noexcept;

  VerifyKind kind() const noexcept { return kind_; }
  uint64_t interval() const noexcept { return interval_; }
  // Bytes of a chunk's header: 32 (crc32c, meta), 48 (md5), 52 (sha1), 64 (sha256), 0 (pattern, none).
  static std::size_t header_size(VerifyKind kind) noexcept;

  // Writes the verify data of a block that goes to namespace byte `offset`. No-op for VerifyKind::none.
  void fill(std::span<uint8_t> block, uint64_t offset, uint64_t seed) noexcept;
  // Checks a block read from namespace byte `offset`. seed nullopt: accept any writer's seed (verify_only /
  // read jobs over data written by an earlier run). nullopt = good.
  std::optional<VerifyFailure> check(std::span<const uint8_t> block, uint64_t offset,
                                     std::optional<uint64_t> seed) noexcept;

 private:
  struct MdFree {
    void operator()(evp_md_st* p) const noexcept;
  };
  struct CtxFree {
    void operator()(evp_md_ctx_st* p) const noexcept;
  };
  std::size_t chunk_count(std::size_t block_len) const noexcept;
  void chunk_bounds(std::size_t block_len, std::size_t i, std::size_t count, std::size_t& begin,
                    std::size_t& end) const noexcept;
  void fill_body(std::span<uint8_t> block, std::size_t begin, std::size_t end, uint64_t chunk_offset, uint64_t seed) const noexcept;
  // First byte in [begin, end) of `block` that differs from the body fill_body() writes; end if none.
  std::size_t first_body_mismatch(std::span<const uint8_t> block, std::size_t begin, std::size_t end,
                                  uint64_t chunk_offset, uint64_t seed, uint8_t& expected) const noexcept;
  void fill_pattern(uint8_t* dst, std::size_t block_pos, std::size_t len) const noexcept;
  bool digest(std::span<const uint8_t> chunk, uint8_t* out) noexcept;
  std::optional<VerifyFailure> check_chunk(std::span<const uint8_t> block, std::size_t begin, std::size_t end,
                                           uint64_t block_offset, std::optional<uint64_t> seed) noexcept;

  VerifyKind kind_ = VerifyKind::none;
  uint64_t interval_ = 0;
  std::size_t header_ = 0, digest_len_ = 0;
  std::vector<uint8_t> pattern_;
  std::vector<uint8_t> tile_;  // pattern_ repeated: tile_len_ + pattern_.size() bytes
  std::size_t tile_len_ = 0;   // a multiple of pattern_.size()
  std::unique_ptr<evp_md_st, MdFree> md_;
  std::unique_ptr<evp_md_ctx_st, CtxFree> ctx_;
  const char* digest_error_ = nullptr;  // set when OpenSSL could not provide the digest
};

// The crc32c format over a whole block (Verifier(VerifyKind::crc32c, {}, 0)).
void fill_verify_block(std::span<uint8_t> block, uint64_t offset, uint64_t seed) noexcept;
std::optional<VerifyFailure> check_verify_block(std::span<const uint8_t> block, uint64_t offset,
                                                std::optional<uint64_t> seed) noexcept;

}  // namespace rdmablk::initiator::bench
