// DH-HMAC-CHAP computations (NVMe Base 2.0, 8.13.5, TP 8006), both sides, with OpenSSL 3 (EVP only). The
// target and the initiator share these; the message formats are protocol/auth.h, the secrets
// security/dhchap_key.h. Everything follows what the Linux kernel computes (drivers/nvme/common/auth.c,
// host/auth.c, target/auth.c), so that a kernel host authenticates to our target and our initiator to nvmet.
//
// One exchange, controller side (host side mirrors it):
//   Negotiate -> pick hash H and DH group; DhKeyPair::generate(group); C1 = random_challenge(H);
//   S1 = next_sequence_number(); send Challenge(C1, S1, public_value()).
//   Reply     -> ks = key_pair.shared_secret(reply.dh_value)            (DH group not null)
//               expect = host_response({H, host_key.transformed(hostnqn), C1, ks, S1, T_ID, SC_C, ...})
//               constant_time_equal(expect, reply.response) or Failure1(failed)
//               if CVALID: R2 = controller_response({H, ctrl_key.transformed(subnqn), C2, ks, S2, ...})
//   Success1(R2) -> Success2.
// Errors are protocol::auth::AuthError: an internal failure is explanation `failed`, a bad peer value
// `incorrect_payload`; the caller puts the explanation in AUTH_Failure1/2.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "protocol/auth.h"
#include "security/dhchap_key.h"

typedef struct evp_pkey_st EVP_PKEY;

namespace rdmablk::security::dhchap {

using protocol::auth::AuthError;
using protocol::auth::AuthResult;
using protocol::auth::DhGroupId;
using protocol::auth::FailureExplanation;
using protocol::auth::HashId;

// A digest or HMAC value (up to 64 bytes), cleansed when destroyed.
class Digest {
 public:
  Digest() noexcept = default;
  Digest(const Digest& other) noexcept = default;
  Digest& operator=(const Digest& other) noexcept = default;
  ~Digest();
  std::span<const uint8_t> view() const noexcept { return {bytes_.data(), size_}; }
  std::size_t size() const noexcept { return size_; }
  uint8_t* data() noexcept { return bytes_.data(); }
  void set_size(std::size_t n) noexcept { size_ = n <= bytes_.size() ? n : bytes_.size(); }

 private:
  std::array<uint8_t, protocol::auth::kMaxHashLength> bytes_{};
  std::size_t size_ = 0;
};

// OpenSSL names: "SHA256"... / "ffdhe2048"...; nullptr for an unknown id (or the null group).
const char* digest_name(HashId hash) noexcept;
const char* dh_group_name(DhGroupId group) noexcept;

// H(data) and HMAC-H(key, part0 || part1 || ...). The key must not be empty.
AuthResult<Digest> hash(HashId hash, std::span<const uint8_t> data);
AuthResult<Digest> hmac(HashId hash, std::span<const uint8_t> key,
                        std::initializer_list<std::span<const uint8_t>> parts);

// A fresh random challenge of hash_length(hash) bytes (C1 on the controller, C2 on the host).
AuthResult<Digest> random_challenge(HashId hash);

// Sequence numbers for S1 / S2 as the kernel makes them (nvme_auth_get_seqnum): a random start, then +1
// per call, never 0. Thread-safe.
uint32_t next_sequence_number() noexcept;

// An ephemeral finite-field DH key pair in an RFC 7919 group (OpenSSL "DH" with the group name).
class DhKeyPair {
 public:
  static AuthResult<DhKeyPair> generate(DhGroupId group);
  DhKeyPair(DhKeyPair&& other) noexcept;
  DhKeyPair& operator=(DhKeyPair&& other) noexcept;
  DhKeyPair(const DhKeyPair&) = delete;
  DhKeyPair& operator=(const DhKeyPair&) = delete;
  ~DhKeyPair();

  DhGroupId group() const noexcept { return group_; }
  // g^x mod p, big-endian, padded to the group size (dh_value_length(group) bytes): the DH value to send.
  std::span<const uint8_t> public_value() const noexcept { return {public_.data(), public_size_}; }
  // g^xy mod p from the peer's DH value, big-endian, padded to the group size - the kernel's sess_key and
  // the input of augmented_challenge(). The peer value must be exactly the group size and in 2..p-2
  // (OpenSSL's public key check runs too); otherwise incorrect_payload.
  AuthResult<SecretBytes> shared_secret(std::span<const uint8_t> peer_value) const;

 private:
  DhKeyPair(EVP_PKEY* key, DhGroupId group) noexcept : key_(key), group_(group) {}
  EVP_PKEY* key_ = nullptr;
  DhGroupId group_ = DhGroupId::null;
  std::array<uint8_t, protocol::auth::kMaxDhValueLength> public_{};
  std::size_t public_size_ = 0;
};

// Ca = HMAC-H(H(g^xy mod p), C) (nvme_auth_augmented_challenge): the challenge a response is computed
// over when a DH group is in use. `challenge` is hash_length(hash) bytes.
AuthResult<Digest> augmented_challenge(HashId hash, std::span<const uint8_t> shared_secret,
                                       std::span<const uint8_t> challenge);

// The inputs of a response.
struct ResponseInput {
  HashId hash = HashId::sha256;            // the hash the controller chose in the Challenge
  std::span<const uint8_t> key;            // transformed key of the side proving itself:
                                           //   R1: host secret transformed with the host NQN
                                           //   R2: controller secret transformed with the subsystem NQN
  std::span<const uint8_t> challenge;      // C1 (R1) or C2 (R2), hash_length(hash) bytes
  std::span<const uint8_t> shared_secret;  // g^xy mod p; empty with the null DH group (C used as is)
  uint32_t seqnum = 0;                     // S1 (R1) or S2 (R2)
  uint16_t t_id = 0;                       // transaction id
  uint8_t sc_c = 0;                        // SC_C byte hashed in (see controller_response)
  std::string_view host_nqn;               // NQNh, without NUL
  std::string_view subsys_nqn;             // NQNc, without NUL
};

// R1 = HMAC-H(Kh', Ca1 || S1 (le32) || T_ID (le16) || SC_C || "HostHost" || NQNh || 00h || NQNc)
// (nvme_auth_dhchap_setup_host_response / nvmet_auth_host_hash).
AuthResult<Digest> host_response(const ResponseInput& in);

// R2 = HMAC-H(Kc', Ca2 || S2 (le32) || T_ID (le16) || SC_C || "Controller" || NQNc || 00h || NQNh)
// (nvme_auth_dhchap_setup_ctrl_response / nvmet_auth_ctrl_hash). The kernel (host and nvmet alike) hashes
// 00h as SC_C here whatever was negotiated: pass sc_c = 0 to interoperate with it.
AuthResult<Digest> controller_response(const ResponseInput& in);

// Secure channel concatenation (TP 8018, nvme_auth_generate_psk): the generated PSK =
// HMAC-H(KS, C1 || C2) with KS the DH shared secret as the kernel uses it (g^xy mod p, padded; not hashed).
// Turning it into the TLS PSK and identity (PSK digest, HKDF-Expand-Label "nvme-tls-psk") is the TLS PSK
// code's job (security/tls_psk).
AuthResult<SecretBytes> generated_psk(HashId hash, std::span<const uint8_t> shared_secret,
                                      std::span<const uint8_t> c1, std::span<const uint8_t> c2);

}  // namespace rdmablk::security::dhchap
