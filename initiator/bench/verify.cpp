#include "initiator/bench/verify.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
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

// A field of the verify header, read as it was stored (memcpy: it need not be aligned).
template <typename T>
T get(const uint8_t* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
uint8_t byte_of(uint64_t v, std::size_t i) noexcept { return static_cast<uint8_t>(v >> (8 * i)); }

// The first byte of the `n`-byte little-endian field at p that differs from `want` (n if none).
std::size_t first_diff(const uint8_t* p, uint64_t want, std::size_t n) noexcept {
  std::size_t i = 0;
  while (i < n && p[i] == byte_of(want, i)) ++i;
  return i;
}

constexpr std::size_t kCrcAt = 28, kDigestAt = 32;

std::size_t kind_index(VerifyKind k) noexcept { return static_cast<std::size_t>(k); }

uint64_t magic_for(VerifyKind k) noexcept {
  static constexpr std::array<char, 7> letters{0, 'Y', 'M', 'S', 'H', 0, 'T'};  // none crc32c md5 sha1 sha256 pattern meta
  return (kVerifyMagic & 0x00FFFFFFFFFFFFFFull) | (static_cast<uint64_t>(static_cast<uint8_t>(letters[kind_index(k)])) << 56);
}

const char* kind_name(VerifyKind k) noexcept {
  static constexpr std::array<const char*, 7> names{"none", "crc32c", "md5", "sha1", "sha256", "pattern", "meta"};
  return names[kind_index(k)];
}

const char* digest_mismatch(VerifyKind k) noexcept {
  static constexpr std::array<const char*, 7> s{"", "crc32c mismatch", "md5 mismatch", "sha1 mismatch", "sha256 mismatch", "", ""};
  return s[kind_index(k)];
}
const char* stored_digest_mismatch(VerifyKind k) noexcept {
  static constexpr std::array<const char*, 7> s{"", "crc32c mismatch in the header's CRC field", "md5 mismatch in the stored digest",
                                                "sha1 mismatch in the stored digest", "sha256 mismatch in the stored digest", "", ""};
  return s[kind_index(k)];
}
const char* written_with(VerifyKind k) noexcept {
  static constexpr std::array<const char*, 7> s{"", "bad magic header (written with verify=crc32c)", "bad magic header (written with verify=md5)",
                                                "bad magic header (written with verify=sha1)", "bad magic header (written with verify=sha256)", "",
                                                "bad magic header (written with verify=meta)"};
  return s[kind_index(k)];
}

std::size_t digest_size(VerifyKind k) noexcept {
  switch (k) {
    case VerifyKind::md5: return 16;
    case VerifyKind::sha1: return 20;
    case VerifyKind::sha256: return 32;
    default: return 0;
  }
}

const char* openssl_name(VerifyKind k) noexcept {
  switch (k) {
    case VerifyKind::md5: return "MD5";
    case VerifyKind::sha1: return "SHA1";
    case VerifyKind::sha256: return "SHA256";
    default: return nullptr;
  }
}

uint32_t header_crc(const uint8_t* chunk) noexcept { return protocol::crc32c(chunk, kCrcAt); }

uint32_t whole_crc(const uint8_t* chunk, std::size_t len) noexcept {  // crc32c kind: all but the CRC field
  protocol::Crc32c crc;
  crc.update(chunk, kCrcAt);
  crc.update(chunk + kVerifyHeaderSize, len - kVerifyHeaderSize);
  return crc.value();
}

}  // namespace

void Verifier::MdFree::operator()(evp_md_st* p) const noexcept { EVP_MD_free(p); }
void Verifier::CtxFree::operator()(evp_md_ctx_st* p) const noexcept { EVP_MD_CTX_free(p); }

std::size_t Verifier::header_size(VerifyKind kind) noexcept {
  switch (kind) {
    case VerifyKind::none:
    case VerifyKind::pattern: return 0;
    default: return kVerifyHeaderSize + digest_size(kind);
  }
}

Verifier::Verifier(VerifyKind kind, std::vector<uint8_t> pattern, uint64_t interval)
    : kind_(kind), interval_(interval), header_(header_size(kind)), digest_len_(digest_size(kind)), pattern_(std::move(pattern)) {
  if (interval_ && interval_ < header_) interval_ = header_;
  if (kind_ == VerifyKind::pattern && pattern_.empty()) pattern_.push_back(0);
  if (!pattern_.empty()) {
    const std::size_t n = pattern_.size();
    tile_len_ = std::max<std::size_t>(1, (4096 + n - 1) / n) * n;
    tile_.resize(tile_len_ + n);
    for (std::size_t i = 0; i < tile_.size(); ++i) tile_[i] = pattern_[i % n];
  }
  if (const char* name = openssl_name(kind_)) {
    md_.reset(EVP_MD_fetch(nullptr, name, nullptr));
    ctx_.reset(EVP_MD_CTX_new());
    if (!md_ || !ctx_) {
      static constexpr std::array<const char*, 7> unavailable{"", "", "md5 is not available from OpenSSL", "sha1 is not available from OpenSSL",
                                                             "sha256 is not available from OpenSSL", "", ""};
      digest_error_ = unavailable[kind_index(kind_)];
    }
  }
}

Result<Verifier> Verifier::create(VerifyKind kind, std::vector<uint8_t> pattern, uint64_t interval) {
  if (kind == VerifyKind::pattern && pattern.empty()) return make_error("verify=pattern needs verify_pattern");
  if (interval && interval < header_size(kind))
    return make_error(fmt::format("verify_interval={} is smaller than the verify={} header ({} bytes)", interval, kind_name(kind),
                                  header_size(kind)));
  Verifier v(kind, std::move(pattern), interval);
  if (v.digest_error_) return make_error(v.digest_error_);
  return v;
}

Verifier::~Verifier() = default;
Verifier::Verifier(Verifier&&) noexcept = default;
Verifier& Verifier::operator=(Verifier&&) noexcept = default;

std::size_t Verifier::chunk_count(std::size_t len) const noexcept {
  if (!interval_ || interval_ >= len) return 1;
  const auto c = static_cast<std::size_t>(interval_);
  std::size_t n = len / c;
  const std::size_t rest = len - n * c;
  if (rest && rest >= header_) ++n;  // a short last chunk that holds a header; a shorter rest joins the last
  return n;
}

void Verifier::chunk_bounds(std::size_t len, std::size_t i, std::size_t count, std::size_t& begin,
                            std::size_t& end) const noexcept {
  if (count == 1) {
    begin = 0;
    end = len;
    return;
  }
  begin = i * static_cast<std::size_t>(interval_);
  end = i + 1 == count ? len : begin + static_cast<std::size_t>(interval_);
}

void Verifier::fill_pattern(uint8_t* dst, std::size_t block_pos, std::size_t len) const noexcept {
  const std::size_t phase = block_pos % pattern_.size();
  while (len) {
    const std::size_t n = std::min(len, tile_len_);
    std::memcpy(dst, tile_.data() + phase, n);
    dst += n;
    len -= n;
  }
}

void Verifier::fill_body(std::span<uint8_t> block, std::size_t begin, std::size_t end, uint64_t chunk_offset,
                         uint64_t seed) const noexcept {
  if (begin >= end) return;
  uint8_t* p = block.data();
  if (!pattern_.empty()) {
    fill_pattern(p + begin, begin, end - begin);
    return;
  }
  Prng rng(seed, chunk_offset);
  std::size_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const uint64_t v = rng.next();
    std::memcpy(p + i, &v, 8);
  }
  if (i < end) {
    const uint64_t v = rng.next();
    std::memcpy(p + i, &v, end - i);
  }
}

std::size_t Verifier::first_body_mismatch(std::span<const uint8_t> block, std::size_t begin, std::size_t end,
                                          uint64_t chunk_offset, uint64_t seed, uint8_t& expected) const noexcept {
  const uint8_t* p = block.data();
  if (!pattern_.empty()) {
    const std::size_t phase = begin % pattern_.size();
    for (std::size_t i = begin; i < end;) {
      const std::size_t n = std::min(end - i, tile_len_);
      if (std::memcmp(p + i, tile_.data() + phase, n) != 0) {
        for (std::size_t k = 0; k < n; ++k)
          if (p[i + k] != tile_[phase + k]) {
            expected = tile_[phase + k];
            return i + k;
          }
      }
      i += n;
    }
    return end;
  }
  Prng rng(seed, chunk_offset);
  for (std::size_t i = begin; i < end; i += 8) {
    const uint64_t v = rng.next();
    const std::size_t n = std::min<std::size_t>(8, end - i);
    uint64_t got = 0;
    std::memcpy(&got, p + i, n);
    const uint64_t want = n == 8 ? v : v & ((1ull << (8 * n)) - 1);
    if (got != want)
      for (std::size_t b = 0; b < n; ++b)
        if (p[i + b] != byte_of(v, b)) {
          expected = byte_of(v, b);
          return i + b;
        }
  }
  return end;
}

bool Verifier::digest(std::span<const uint8_t> chunk, uint8_t* out) noexcept {
  unsigned n = 0;
  return ctx_ && md_ && EVP_DigestInit_ex(ctx_.get(), md_.get(), nullptr) == 1 &&
         EVP_DigestUpdate(ctx_.get(), chunk.data(), kCrcAt) == 1 &&
         EVP_DigestUpdate(ctx_.get(), chunk.data() + header_, chunk.size() - header_) == 1 &&
         EVP_DigestFinal_ex(ctx_.get(), out, &n) == 1 && n == digest_len_;
}

void Verifier::fill(std::span<uint8_t> block, uint64_t offset, uint64_t seed) noexcept {
  if (kind_ == VerifyKind::none || block.empty()) return;
  if (kind_ == VerifyKind::pattern) {
    fill_pattern(block.data(), 0, block.size());
    return;
  }
  if (block.size() < header_) return;
  const std::size_t chunks = chunk_count(block.size());
  for (std::size_t c = 0; c < chunks; ++c) {
    std::size_t begin, end;
    chunk_bounds(block.size(), c, chunks, begin, end);
    const uint64_t chunk_offset = offset + begin;
    fill_body(block, begin + header_, end, chunk_offset, seed);
    uint8_t* p = block.data() + begin;
    const uint64_t magic = magic_for(kind_);
    const auto len = static_cast<uint32_t>(end - begin);
    std::memcpy(p, &magic, 8);
    std::memcpy(p + 8, &chunk_offset, 8);
    std::memcpy(p + 16, &seed, 8);
    std::memcpy(p + 24, &len, 4);
    const uint32_t crc = kind_ == VerifyKind::crc32c ? whole_crc(p, end - begin) : header_crc(p);
    std::memcpy(p + kCrcAt, &crc, 4);
    if (digest_len_) {
      std::array<uint8_t, EVP_MAX_MD_SIZE> d{};
      if (!digest(std::span<const uint8_t>(p, end - begin), d.data())) d.fill(0);
      std::memcpy(p + kDigestAt, d.data(), digest_len_);
    }
  }
}

std::optional<VerifyFailure> Verifier::check_chunk(std::span<const uint8_t> block, std::size_t begin, std::size_t end,
                                                   uint64_t block_offset, std::optional<uint64_t> seed) noexcept {
  const uint8_t* p = block.data() + begin;
  const std::size_t len = end - begin;
  const uint64_t coff = block_offset + begin;
  auto fail = [&](std::size_t at, uint8_t expected, const char* what) {
    return VerifyFailure{coff + at, expected, p[at], what, coff, len};
  };
  const uint64_t magic = magic_for(kind_);
  if (const uint64_t got = get<uint64_t>(p); got != magic) {
    const char* what = "bad magic header";
    if (std::all_of(p, p + len, [](uint8_t b) { return b == 0; })) {
      what = "bad magic header (block reads as zeroes: never written?)";
    } else {
      for (VerifyKind k : {VerifyKind::crc32c, VerifyKind::md5, VerifyKind::sha1, VerifyKind::sha256, VerifyKind::meta})
        if (got == magic_for(k)) what = written_with(k);
    }
    const std::size_t at = first_diff(p, magic, 8);
    return fail(at, byte_of(magic, at), what);
  }
  if (get<uint64_t>(p + 8) != coff) {
    const std::size_t at = first_diff(p + 8, coff, 8);
    return fail(8 + at, byte_of(coff, at), "header names another offset (misplaced write)");
  }
  if (get<uint32_t>(p + 24) != len) {
    const std::size_t at = first_diff(p + 24, len, 4);
    return fail(24 + at, byte_of(len, at), "header names another length (written with another bs or verify_interval?)");
  }
  const uint64_t writer_seed = get<uint64_t>(p + 16);
  if (seed && writer_seed != *seed) {
    const std::size_t at = first_diff(p + 16, *seed, 8);
    return fail(16 + at, byte_of(*seed, at), "stale data: written by another run (seed)");
  }
  uint8_t expected = 0;
  if (kind_ == VerifyKind::crc32c) {
    const uint32_t crc = whole_crc(p, len);
    if (crc == get<uint32_t>(p + kCrcAt)) return std::nullopt;
    const std::size_t at = first_body_mismatch(block, begin + kVerifyHeaderSize, end, coff, writer_seed, expected);
    if (at < end) return fail(at - begin, expected, "crc32c mismatch");
    const std::size_t i = first_diff(p + kCrcAt, crc, 4);
    return fail(kCrcAt + i, byte_of(crc, i), stored_digest_mismatch(kind_));
  }
  if (const uint32_t crc = header_crc(p); crc != get<uint32_t>(p + kCrcAt)) {
    const std::size_t i = first_diff(p + kCrcAt, crc, 4);
    return fail(kCrcAt + i, byte_of(crc, i), "header CRC mismatch (the header is corrupted)");
  }
  if (kind_ == VerifyKind::meta) return std::nullopt;
  std::array<uint8_t, EVP_MAX_MD_SIZE> d{};
  if (!digest(std::span<const uint8_t>(p, len), d.data())) return fail(kDigestAt, 0, "digest computation failed (OpenSSL)");
  if (std::memcmp(d.data(), p + kDigestAt, digest_len_) == 0) return std::nullopt;
  const std::size_t at = first_body_mismatch(block, begin + header_, end, coff, writer_seed, expected);
  if (at < end) return fail(at - begin, expected, digest_mismatch(kind_));
  std::size_t i = 0;
  while (i + 1 < digest_len_ && p[kDigestAt + i] == d[i]) ++i;
  return fail(kDigestAt + i, d[i], stored_digest_mismatch(kind_));
}

std::optional<VerifyFailure> Verifier::check(std::span<const uint8_t> block, uint64_t offset,
                                             std::optional<uint64_t> seed) noexcept {
  if (kind_ == VerifyKind::none) return std::nullopt;
  const uint8_t first = block.empty() ? 0 : block[0];
  if (digest_error_) return VerifyFailure{offset, 0, first, digest_error_, offset, block.size()};
  if (kind_ == VerifyKind::pattern) {
    uint8_t expected = 0;
    const std::size_t at = first_body_mismatch(block, 0, block.size(), offset, 0, expected);
    if (at == block.size()) return std::nullopt;
    return VerifyFailure{offset + at, expected, block[at], "pattern mismatch", offset, block.size()};
  }
  if (block.size() < header_) return VerifyFailure{offset, 0, first, "block shorter than the verify header", offset, block.size()};
  const std::size_t chunks = chunk_count(block.size());
  for (std::size_t c = 0; c < chunks; ++c) {
    std::size_t begin, end;
    chunk_bounds(block.size(), c, chunks, begin, end);
    if (auto f = check_chunk(block, begin, end, offset, seed)) return f;
  }
  return std::nullopt;
}

std::string describe(const VerifyFailure& f, uint64_t block_offset, std::size_t block_len) {
  std::string chunk;
  if (f.chunk_len && (f.chunk_offset != block_offset || f.chunk_len != block_len))
    chunk = fmt::format(", chunk at offset {}, length {}", f.chunk_offset, f.chunk_len);
  return fmt::format("verify: {} at byte offset {} (block at offset {}, length {}{}): expected 0x{:02x}, got 0x{:02x}", f.what,
                     f.offset, block_offset, block_len, chunk, f.expected, f.actual);
}

void fill_verify_block(std::span<uint8_t> block, uint64_t offset, uint64_t seed) noexcept {
  Verifier(VerifyKind::crc32c, {}, 0).fill(block, offset, seed);
}

std::optional<VerifyFailure> check_verify_block(std::span<const uint8_t> block, uint64_t offset,
                                                std::optional<uint64_t> seed) noexcept {
  return Verifier(VerifyKind::crc32c, {}, 0).check(block, offset, seed);
}

}  // namespace rdmablk::initiator::bench
