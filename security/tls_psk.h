// NVMe/TCP TLS pre-shared keys (NVMe/TCP Transport 1.1 section 3.6.1, TP 8011): the PSK interchange format
// `nvme gen-tls-key` prints, the retained PSK, the PSK identity and the TLS PSK the handshake uses.
//
//   configured PSK --(HKDF "HostNQN", unless the interchange hash is 00)--> retained PSK
//   retained PSK   --(HMAC over "<hostnqn> <subnqn> NVMe-over-Fabrics")--> PSK digest (identity version 1)
//   retained PSK   --(HKDF "nvme-tls-psk", context)--> TLS PSK, offered under the identity
//     version 0: identity "NVMe0R<hh> <hostnqn> <subnqn>",          context = the identity
//     version 1: identity "NVMe1R<hh> <hostnqn> <subnqn> <digest>", context = "<hh> <digest>"
//
// This is what libnvme (nvme gen-tls-key / nvme_insert_tls_key_versioned: the key it puts in the kernel's
// .nvme keyring under the identity, which tlshd then offers), SPDK and the kernel's
// nvme_auth_derive_tls_psk compute. The HKDF info is RFC 8446's HkdfLabel. libnvme before its fix built it
// without the length bytes and with a little-endian length (still offered as the *_compat functions and
// `--compat`); PskDerivation::libnvme_compat reproduces that for keys inserted by such a libnvme.
//
// Keys live in Secret (fixed storage, OPENSSL_cleanse on destruction) and never appear in error messages.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "protocol/result.h"

namespace rdmablk::security {

// Key bytes in fixed storage (no reallocation leaves copies behind), wiped when destroyed or overwritten.
class Secret {
 public:
  static constexpr std::size_t kCapacity = 64;

  Secret() noexcept = default;
  // Takes the first min(bytes.size(), kCapacity) bytes; callers check lengths first.
  explicit Secret(std::span<const uint8_t> bytes) noexcept;
  Secret(const Secret& other) noexcept;
  Secret& operator=(const Secret& other) noexcept;
  ~Secret();

  std::span<const uint8_t> bytes() const noexcept { return {data_.data(), size_}; }
  const uint8_t* data() const noexcept { return data_.data(); }
  uint8_t* mutable_data() noexcept { return data_.data(); }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // Sets the length (<= kCapacity; bytes past it are wiped).
  void resize(std::size_t n) noexcept;
  void clear() noexcept;
  // Constant time in the contents (CRYPTO_memcmp); lengths are not secret.
  bool equals(std::span<const uint8_t> other) const noexcept;

 private:
  std::array<uint8_t, kCapacity> data_{};
  std::size_t size_ = 0;
};

// The hash of an interchange key (how the configured PSK becomes the retained PSK) and of a PSK identity
// (the cipher suite: 01 TLS_AES_128_GCM_SHA256, 02 TLS_AES_256_GCM_SHA384). The values are the wire digits.
enum class PskHash : uint8_t { none = 0, sha256 = 1, sha384 = 2 };

// Output length of the hash (32 / 48); 0 for none.
std::size_t psk_hash_length(PskHash hash) noexcept;

// A configured PSK as the interchange format carries it: 32 or 48 bytes and the transform hash.
struct ConfiguredPsk {
  Secret key;
  PskHash hash = PskHash::none;

  // The hash of the cipher suite this key goes with: the transform hash, or by key length when none.
  PskHash cipher_hash() const noexcept;
};

// Parses "NVMeTLSkey-1:HH:<base64(key || CRC-32 LE)>:" (HH 00 with a 32- or 48-byte key, 01 with 32, 02 with
// 48). Surrounding whitespace (a trailing newline from a key file) is ignored. Errors never quote the key.
Result<ConfiguredPsk> parse_psk_interchange(std::string_view text);
// The interchange form of `psk` (what `nvme gen-tls-key` prints).
Result<std::string> format_psk_interchange(const ConfiguredPsk& psk);
// A new random configured PSK (RAND_priv_bytes): 32 bytes for sha256, 48 for sha384; for none, key_length
// (32 or 48) says which.
Result<ConfiguredPsk> generate_configured_psk(PskHash hash, std::size_t key_length = 0);

// How the HKDF info is encoded (see the file comment).
enum class PskDerivation : uint8_t { standard, libnvme_compat };

// RFC 5869 HKDF-Extract with a zero salt, and RFC 8446 7.1 HKDF-Expand-Label ("tls13 " + label), through
// OpenSSL's HKDF. hash is sha256 or sha384. Context is at most 255 bytes, label at most 249.
Result<Secret> hkdf_extract(PskHash hash, std::span<const uint8_t> input_key);
Result<Secret> hkdf_expand_label(PskHash hash, std::span<const uint8_t> secret, std::string_view label,
                                 std::span<const uint8_t> context, std::size_t length,
                                 PskDerivation derivation = PskDerivation::standard);

// NQNs as they may appear in an identity: 1..223 bytes, printable ASCII, no space (the identity's separator).
bool valid_identity_nqn(std::string_view nqn) noexcept;

// Retained PSK = HKDF-Expand-Label(HKDF-Extract(0, configured), "HostNQN", hostnqn, length) with the
// interchange hash; the configured PSK itself when that hash is none.
Result<Secret> derive_retained_psk(const ConfiguredPsk& configured, std::string_view hostnqn,
                                   PskDerivation derivation = PskDerivation::standard);

// PSK digest (identity version 1): Base64(HMAC-hash(retained, hostnqn " " subnqn " NVMe-over-Fabrics")),
// 44 characters for sha256, 64 for sha384.
Result<std::string> derive_psk_digest(PskHash hash, std::span<const uint8_t> retained, std::string_view hostnqn,
                                      std::string_view subnqn);

// A PSK identity "NVMe<v><type><hh> <hostnqn> <subnqn>[ <digest>]".
struct PskIdentity {
  int version = 1;          // 0: no digest; 1: with the PSK digest
  char type = 'R';          // R: retained PSK (configured); G: generated (secure channel concatenation)
  PskHash hash = PskHash::sha256;
  std::string hostnqn;
  std::string subnqn;
  std::string digest;       // version 1 only

  std::string to_string() const;
};
// Strict: version 0 or 1, type R or G, hh 01 or 02, valid NQNs, a digest of the hash's Base64 length exactly
// when version is 1, nothing else. Fuzzed: never reads past `text`.
Result<PskIdentity> parse_psk_identity(std::string_view text);

// TLS PSK = HKDF-Expand-Label(HKDF-Extract(0, retained), "nvme-tls-psk", context, retained.size()) with
// the identity's hash.
Result<Secret> derive_tls_psk(PskHash hash, std::span<const uint8_t> retained, std::string_view context,
                              PskDerivation derivation = PskDerivation::standard);

// Everything one side of a connection needs from a configured PSK: the identity it offers (or expects)
// and the TLS PSK behind it.
struct TlsPsk {
  std::string identity;
  PskHash hash = PskHash::sha256;  // the cipher suite's hash
  Secret key;                      // the TLS PSK (external PSK of RFC 8446)
};
// identity_version 0 or 1.
Result<TlsPsk> derive_tls_psk_for(const ConfiguredPsk& configured, std::string_view hostnqn,
                                  std::string_view subnqn, int identity_version,
                                  PskDerivation derivation = PskDerivation::standard);

// CRC-32 (IEEE 802.3, zlib's crc32) of the interchange format.
uint32_t psk_crc32(std::span<const uint8_t> bytes) noexcept;

}  // namespace rdmablk::security
