#include "security/dhchap_key.h"

#include <isa-l/crc.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstring>
#include <string>

#include "security/dhchap.h"

namespace rdmablk::security::dhchap {

namespace {

constexpr std::size_t kCrcSize = 4;

constexpr bool is_valid_key_length(std::size_t n) noexcept { return n == 32 || n == 48 || n == 64; }

constexpr bool is_base64_char(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

std::string_view trim_trailing_space(std::string_view s) noexcept {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// Strict base64 (RFC 4648, with padding): a multiple of 4 characters, '=' only as the last one or two.
// Decodes into a cleansed buffer; the caller re-encodes to refuse non-canonical trailing bits.
Result<SecretBytes> decode_base64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) {
    return make_error("DH-HMAC-CHAP secret: base64 part is not a non-empty multiple of 4 characters");
  }
  std::size_t pad = 0;
  if (text.back() == '=') pad = text[text.size() - 2] == '=' ? 2 : 1;
  for (std::size_t i = 0; i < text.size() - pad; ++i) {
    if (!is_base64_char(text[i])) return make_error("DH-HMAC-CHAP secret: invalid base64 character");
  }
  SecretBytes out(text.size() / 4 * 3);
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0 || static_cast<std::size_t>(n) != out.size()) return make_error("DH-HMAC-CHAP secret: invalid base64");
  out.truncate(out.size() - pad);  // EVP_DecodeBlock counts the padding as zero bytes
  return out;
}

std::string encode_base64(std::span<const uint8_t> bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

Result<HashId> transform_hash(KeyTransform t) {
  switch (t) {
    case KeyTransform::sha256: return HashId::sha256;
    case KeyTransform::sha384: return HashId::sha384;
    case KeyTransform::sha512: return HashId::sha512;
    case KeyTransform::none: break;
  }
  return make_error("DH-HMAC-CHAP secret: no hash for this transform");
}

bool is_valid_transform(KeyTransform t) noexcept { return static_cast<uint8_t>(t) <= 3; }

std::span<const uint8_t> bytes_of(std::string_view s) noexcept {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

SecretBytes::SecretBytes(std::size_t size) : bytes_(size ? new uint8_t[size]() : nullptr), size_(size) {}

SecretBytes::SecretBytes(std::span<const uint8_t> bytes) : SecretBytes(bytes.size()) {
  if (!bytes.empty()) std::memcpy(bytes_.get(), bytes.data(), bytes.size());
}

SecretBytes::SecretBytes(SecretBytes&& other) noexcept : bytes_(std::move(other.bytes_)), size_(other.size_) {
  other.size_ = 0;
}

SecretBytes& SecretBytes::operator=(SecretBytes&& other) noexcept {
  if (this != &other) {
    wipe();
    bytes_ = std::move(other.bytes_);
    size_ = other.size_;
    other.size_ = 0;
  }
  return *this;
}

SecretBytes::~SecretBytes() { wipe(); }

void SecretBytes::wipe() noexcept {
  if (bytes_) OPENSSL_cleanse(bytes_.get(), size_);
  bytes_.reset();
  size_ = 0;
}

void SecretBytes::truncate(std::size_t n) noexcept {
  if (n >= size_) return;
  OPENSSL_cleanse(bytes_.get() + n, size_ - n);
  size_ = n;  // the allocation keeps its size; wipe() cleanses only size_ bytes, the tail is clean already
}

bool constant_time_equal(std::span<const uint8_t> a, std::span<const uint8_t> b) noexcept {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

uint32_t dhchap_crc32(std::span<const uint8_t> bytes) noexcept {
  // ISA-L's reflected IEEE CRC-32 is zlib's crc32(): init 0 here, the ~ in and out happen inside.
  return crc32_gzip_refl(0, bytes.data(), bytes.size());
}

Result<DhchapKey> DhchapKey::parse(std::string_view text) {
  text = trim_trailing_space(text);
  if (text.substr(0, kDhchapKeyPrefix.size()) != kDhchapKeyPrefix) {
    return make_error("DH-HMAC-CHAP secret: does not start with DHHC-1:");
  }
  text.remove_prefix(kDhchapKeyPrefix.size());
  // XX: two digits 00..03 (hex in nvme-cli's output, decimal in the kernel's parser: the same for these).
  if (text.size() < 3 || text[0] != '0' || text[1] < '0' || text[1] > '3' || text[2] != ':') {
    return make_error("DH-HMAC-CHAP secret: transform field is not 00, 01, 02 or 03");
  }
  const auto transform = static_cast<KeyTransform>(text[1] - '0');
  text.remove_prefix(3);
  const std::size_t colon = text.find(':');
  if (colon != std::string_view::npos) {
    if (colon + 1 != text.size()) return make_error("DH-HMAC-CHAP secret: characters after the closing ':'");
    text = text.substr(0, colon);
  }
  auto raw = decode_base64(text);
  if (!raw) return tl::unexpected(raw.error());
  if (raw->size() < kCrcSize || !is_valid_key_length(raw->size() - kCrcSize)) {
    return make_error("DH-HMAC-CHAP secret: key is " +
                      std::to_string(raw->size() < kCrcSize ? 0 : raw->size() - kCrcSize) +
                      " bytes, want 32, 48 or 64 (plus a 4-byte CRC)");
  }
  if (encode_base64(raw->view()) != text) {
    return make_error("DH-HMAC-CHAP secret: base64 part is not in canonical form");
  }
  const std::size_t key_len = raw->size() - kCrcSize;
  const uint8_t* c = raw->data() + key_len;
  const uint32_t stored = uint32_t{c[0]} | uint32_t{c[1]} << 8 | uint32_t{c[2]} << 16 | uint32_t{c[3]} << 24;
  if (stored != dhchap_crc32(raw->view().first(key_len))) {
    return make_error("DH-HMAC-CHAP secret: CRC-32 mismatch (the secret is corrupted or mistyped)");
  }
  raw->truncate(key_len);
  return DhchapKey(std::move(*raw), transform);
}

Result<DhchapKey> DhchapKey::generate(std::size_t length, KeyTransform transform) {
  if (!is_valid_key_length(length)) return make_error("DH-HMAC-CHAP secret length must be 32, 48 or 64 bytes");
  if (!is_valid_transform(transform)) return make_error("DH-HMAC-CHAP transform must be 0, 1, 2 or 3");
  SecretBytes secret(length);
  if (RAND_bytes(secret.data(), static_cast<int>(length)) != 1) {
    return make_error("DH-HMAC-CHAP secret: the random generator failed");
  }
  return DhchapKey(std::move(secret), transform);
}

Result<DhchapKey> DhchapKey::from_secret(std::span<const uint8_t> secret, KeyTransform transform) {
  if (!is_valid_key_length(secret.size())) return make_error("DH-HMAC-CHAP secret length must be 32, 48 or 64 bytes");
  if (!is_valid_transform(transform)) return make_error("DH-HMAC-CHAP transform must be 0, 1, 2 or 3");
  return DhchapKey(SecretBytes(secret), transform);
}

std::string DhchapKey::format() const {
  SecretBytes raw(secret_.size() + kCrcSize);
  std::memcpy(raw.data(), secret_.data(), secret_.size());
  const uint32_t crc = dhchap_crc32(secret_.view());
  for (std::size_t i = 0; i < kCrcSize; ++i) raw.data()[secret_.size() + i] = static_cast<uint8_t>(crc >> (8 * i));
  std::string out(kDhchapKeyPrefix);
  out += '0';
  out += static_cast<char>('0' + static_cast<uint8_t>(transform_));
  out += ':';
  std::string b64 = encode_base64(raw.view());
  out += b64;
  out += ':';
  OPENSSL_cleanse(b64.data(), b64.size());
  return out;
}

Result<SecretBytes> DhchapKey::transformed(std::string_view nqn) const {
  if (transform_ == KeyTransform::none) return secret_.clone();
  if (nqn.empty() || nqn.find('\0') != std::string_view::npos) {
    return make_error("DH-HMAC-CHAP key transform: NQN is empty or has a NUL byte");
  }
  auto hash_id = transform_hash(transform_);
  if (!hash_id) return tl::unexpected(hash_id.error());
  static constexpr std::string_view kLabel = "NVMe-over-Fabrics";
  auto mac = hmac(*hash_id, secret_.view(), {bytes_of(nqn), bytes_of(kLabel)});
  if (!mac) return make_error(std::string("DH-HMAC-CHAP key transform: ") + mac.error().what);
  return SecretBytes(mac->view());
}

}  // namespace rdmablk::security::dhchap
