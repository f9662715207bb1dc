// DH-HMAC-CHAP secrets (NVMe Base 2.0, 8.13.5.8 "DH-HMAC-CHAP secret representation"): the
// "DHHC-1:XX:<base64>:" form `nvme gen-dhchap-key` prints and the Linux kernel (dhchap_secret /
// dhchap_ctrl_secret), nvmet's configfs and SPDK's keyring take, and the key transform both sides apply
// before using a secret.
//
//   XX      00 no transform, 01 SHA-256, 02 SHA-384, 03 SHA-512 (the hash of the transform below)
//   base64  key || CRC-32 of the key (IEEE / zlib polynomial, little endian); the key is 32, 48 or 64 bytes
//           whatever XX is (the kernel allows any combination since 6.x)
//   transformed key = key when XX is 00, else HMAC-hash(key, NQN || "NVMe-over-Fabrics") where NQN is the
//           NQN of the side that owns the secret (host NQN for the host secret, subsystem NQN for the
//           controller secret) - nvme_auth_transform_key().
//
// Secrets live in SecretBytes, cleansed (OPENSSL_cleanse) when freed; no error message ever quotes one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "protocol/result.h"

namespace rdmablk::security::dhchap {

// A fixed-size heap buffer for key material, cleansed on destruction. Move-only: copies are explicit.
class SecretBytes {
 public:
  SecretBytes() noexcept = default;
  explicit SecretBytes(std::size_t size);  // zero-filled
  explicit SecretBytes(std::span<const uint8_t> bytes);
  SecretBytes(SecretBytes&& other) noexcept;
  SecretBytes& operator=(SecretBytes&& other) noexcept;
  SecretBytes(const SecretBytes&) = delete;
  SecretBytes& operator=(const SecretBytes&) = delete;
  ~SecretBytes();

  SecretBytes clone() const { return SecretBytes(view()); }
  uint8_t* data() noexcept { return bytes_.get(); }
  const uint8_t* data() const noexcept { return bytes_.get(); }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::span<const uint8_t> view() const noexcept { return {bytes_.get(), size_}; }
  std::span<uint8_t> mutable_view() noexcept { return {bytes_.get(), size_}; }
  // Keep the first n bytes (n <= size()); the rest is cleansed.
  void truncate(std::size_t n) noexcept;

 private:
  void wipe() noexcept;
  std::unique_ptr<uint8_t[]> bytes_;
  std::size_t size_ = 0;
};

// Constant-time comparison (CRYPTO_memcmp); spans of different sizes are unequal (sizes are not secret).
bool constant_time_equal(std::span<const uint8_t> a, std::span<const uint8_t> b) noexcept;

// The XX field: which hash transforms the secret before use (values are the HashIDs).
enum class KeyTransform : uint8_t { none = 0x00, sha256 = 0x01, sha384 = 0x02, sha512 = 0x03 };

inline constexpr std::string_view kDhchapKeyPrefix = "DHHC-1:";

class DhchapKey {
 public:
  // Parse "DHHC-1:XX:<base64>:" (the trailing ':' optional as for the kernel; trailing whitespace such as
  // the newline of a key file ignored). Refuses a wrong prefix or XX, bad base64, a key that is not
  // 32/48/64 bytes and a CRC mismatch - saying which, never quoting the text.
  static Result<DhchapKey> parse(std::string_view text);
  // A new random secret (RAND_bytes) of `length` bytes (32, 48 or 64), as `nvme gen-dhchap-key` makes.
  static Result<DhchapKey> generate(std::size_t length = 32, KeyTransform transform = KeyTransform::none);
  // A given secret (`nvme gen-dhchap-key --secret <hex>`).
  static Result<DhchapKey> from_secret(std::span<const uint8_t> secret, KeyTransform transform);

  KeyTransform transform() const noexcept { return transform_; }
  std::span<const uint8_t> secret() const noexcept { return secret_.view(); }

  // "DHHC-1:XX:<base64 of key || CRC-32 LE>:". The result is itself the secret: the caller decides where
  // it goes (and cleanses it when done if it must).
  std::string format() const;

  // The key the HMAC of a response uses: the secret, or HMAC-hash(secret, nqn || "NVMe-over-Fabrics").
  // `nqn` is the owner's NQN (host NQN for a host secret, subsystem NQN for a controller secret).
  Result<SecretBytes> transformed(std::string_view nqn) const;

 private:
  DhchapKey(SecretBytes secret, KeyTransform transform) noexcept : secret_(std::move(secret)), transform_(transform) {}
  SecretBytes secret_;
  KeyTransform transform_ = KeyTransform::none;
};

// CRC-32 (IEEE 802.3 / zlib, reflected, init and final xor ~0) as the representation uses it.
uint32_t dhchap_crc32(std::span<const uint8_t> bytes) noexcept;

}  // namespace rdmablk::security::dhchap
