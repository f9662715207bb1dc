// NVMe in-band authentication wire formats (NVMe Base 2.0, 6.2 / 6.3 "Authentication Send / Receive" and
// 8.13 "NVMe over Fabrics In-band Authentication", TP 8006 DH-HMAC-CHAP; TP 8018 for SC_C).
//
// The host runs the protocol with Authentication Send (FCTYPE 05h) carrying a message to the controller and
// Authentication Receive (FCTYPE 06h) fetching the controller's next message. A DH-HMAC-CHAP transaction:
//   host -> AUTH_Negotiate            (common message: hash and DH group lists, SC_C)
//   ctrl -> DH-HMAC-CHAP_Challenge    (chosen hash + DH group, seqnum S1, challenge C1, DH value g^x)
//   host -> DH-HMAC-CHAP_Reply        (response R1, optional challenge C2 + seqnum S2, DH value g^y)
//   ctrl -> DH-HMAC-CHAP_Success1     (optional response R2 to C2)
//   host -> DH-HMAC-CHAP_Success2     (only when the host asked for R2 and it checked out)
// and either side may answer with AUTH_Failure1 (controller) / AUTH_Failure2 (host) instead.
//
// Constant values and layouts are the Linux kernel's include/linux/nvme.h (nvmf_auth_*), named after the
// spec fields. Decoders never read past the span they are given and return the Failure reason code
// explanation the spec (and the kernel / SPDK) use for the problem found. A decoded message holds spans
// into the caller's buffer: it is valid as long as that buffer is.
#pragma once

#include <tl/expected.hpp>

#include "protocol/wire.h"
#include "protocol/result.h"
#include "protocol/sgl.h"

namespace rdmablk::protocol::auth {

// ---------------------------------------------------------------------------------------------------------
// Authentication Send / Receive commands
// ---------------------------------------------------------------------------------------------------------

// SECP: security protocol "NVMe" (NVME_AUTH_DHCHAP_PROTOCOL_IDENTIFIER).
inline constexpr uint8_t kSecpNvme = 0xE9;
// SPSP0 / SPSP1: SP specific 0 and 1; 01h/01h select DH-HMAC-CHAP in-band authentication (the kernel host,
// nvmet and SPDK all send and require exactly these).
inline constexpr uint8_t kSpsp0Dhchap = 0x01;
inline constexpr uint8_t kSpsp1Dhchap = 0x01;
// Largest transfer the kernel host uses for one message (CHAP_BUF_SIZE): enough for a Reply with ffdhe8192
// (16 + 2 * 64 + 1024 = 1168 bytes) and a Negotiate with up to 63 protocol descriptors.
inline constexpr uint32_t kMaxTransferLength = 4096;

// Authentication Send (FCTYPE 05h) (nvmf_auth_send_command).
struct AuthenticationSendCommand {
  uint8_t opcode;                  // 0  0x7F
  uint8_t flags;                   // 1  PSDT 7:6 (SGL)
  le16 cid;                        // 2  command identifier
  uint8_t fctype;                  // 4  0x05
  std::array<uint8_t, 19> rsvd5;   // 5
  SglDescriptor dptr;              // 24 SGL1: the message, TL bytes host to controller
  uint8_t rsvd40;                  // 40
  uint8_t spsp0;                   // 41 SP specific 0: 01h
  uint8_t spsp1;                   // 42 SP specific 1: 01h
  uint8_t secp;                    // 43 security protocol: E9h
  le32 tl;                         // 44 transfer length in bytes
  std::array<uint8_t, 16> rsvd48;  // 48
};
static_assert(sizeof(AuthenticationSendCommand) == 64);
static_assert(offsetof(AuthenticationSendCommand, opcode) == 0);
static_assert(offsetof(AuthenticationSendCommand, flags) == 1);
static_assert(offsetof(AuthenticationSendCommand, cid) == 2);
static_assert(offsetof(AuthenticationSendCommand, fctype) == 4);
static_assert(offsetof(AuthenticationSendCommand, rsvd5) == 5);
static_assert(offsetof(AuthenticationSendCommand, dptr) == 24);
static_assert(offsetof(AuthenticationSendCommand, rsvd40) == 40);
static_assert(offsetof(AuthenticationSendCommand, spsp0) == 41);
static_assert(offsetof(AuthenticationSendCommand, spsp1) == 42);
static_assert(offsetof(AuthenticationSendCommand, secp) == 43);
static_assert(offsetof(AuthenticationSendCommand, tl) == 44);
static_assert(offsetof(AuthenticationSendCommand, rsvd48) == 48);

// Authentication Receive (FCTYPE 06h) (nvmf_auth_receive_command).
struct AuthenticationReceiveCommand {
  uint8_t opcode;                  // 0  0x7F
  uint8_t flags;                   // 1  PSDT 7:6 (SGL)
  le16 cid;                        // 2  command identifier
  uint8_t fctype;                  // 4  0x06
  std::array<uint8_t, 19> rsvd5;   // 5
  SglDescriptor dptr;              // 24 SGL1: buffer for the message, AL bytes controller to host
  uint8_t rsvd40;                  // 40
  uint8_t spsp0;                   // 41 SP specific 0: 01h
  uint8_t spsp1;                   // 42 SP specific 1: 01h
  uint8_t secp;                    // 43 security protocol: E9h
  le32 al;                         // 44 allocation length in bytes
  std::array<uint8_t, 16> rsvd48;  // 48
};
static_assert(sizeof(AuthenticationReceiveCommand) == 64);
static_assert(offsetof(AuthenticationReceiveCommand, opcode) == 0);
static_assert(offsetof(AuthenticationReceiveCommand, flags) == 1);
static_assert(offsetof(AuthenticationReceiveCommand, cid) == 2);
static_assert(offsetof(AuthenticationReceiveCommand, fctype) == 4);
static_assert(offsetof(AuthenticationReceiveCommand, rsvd5) == 5);
static_assert(offsetof(AuthenticationReceiveCommand, dptr) == 24);
static_assert(offsetof(AuthenticationReceiveCommand, rsvd40) == 40);
static_assert(offsetof(AuthenticationReceiveCommand, spsp0) == 41);
static_assert(offsetof(AuthenticationReceiveCommand, spsp1) == 42);
static_assert(offsetof(AuthenticationReceiveCommand, secp) == 43);
static_assert(offsetof(AuthenticationReceiveCommand, al) == 44);
static_assert(offsetof(AuthenticationReceiveCommand, rsvd48) == 48);
static_assert(std::is_trivially_copyable_v<AuthenticationSendCommand>);
static_assert(std::is_trivially_copyable_v<AuthenticationReceiveCommand>);

// Builders (PSDT = SGL, SECP E9h, SPSP0/1 01h).
AuthenticationSendCommand make_authentication_send(uint16_t cid, uint32_t tl, const SglDescriptor& dptr) noexcept;
AuthenticationReceiveCommand make_authentication_receive(uint16_t cid, uint32_t al,
                                                         const SglDescriptor& dptr) noexcept;

// Controller side checks of the command fields, as nvmet does: SECP, SPSP0, SPSP1, then a non-zero TL/AL.
// On success the transfer length; on failure the byte offset of the bad field in the command (for the
// error location) - the command then completes with Invalid Field in Command + DNR.
Decoded<uint32_t> check_authentication_send(const AuthenticationSendCommand& cmd) noexcept;
Decoded<uint32_t> check_authentication_receive(const AuthenticationReceiveCommand& cmd) noexcept;

// ---------------------------------------------------------------------------------------------------------
// Identifiers
// ---------------------------------------------------------------------------------------------------------

// AUTH_TYPE: message class (NVME_AUTH_COMMON_MESSAGES / NVME_AUTH_DHCHAP_MESSAGES).
enum class AuthType : uint8_t {
  common = 0x00,  // AUTH_Negotiate, AUTH_Failure1, AUTH_Failure2
  dhchap = 0x01,  // DH-HMAC-CHAP_Challenge / _Reply / _Success1 / _Success2
};

// AUTH_ID: message identifier (NVME_AUTH_DHCHAP_MESSAGE_*).
enum class MessageId : uint8_t {
  negotiate = 0x00,
  challenge = 0x01,
  reply = 0x02,
  success1 = 0x03,
  success2 = 0x04,
  failure2 = 0xF0,  // host to controller
  failure1 = 0xF1,  // controller to host
};

// AUTHID of a protocol descriptor in AUTH_Negotiate: DH-HMAC-CHAP (NVME_AUTH_DHCHAP_AUTH_ID).
inline constexpr uint8_t kDhchapAuthId = 0x01;

// HashID (NVME_AUTH_HASH_*): the hash function of the HMAC.
enum class HashId : uint8_t { sha256 = 0x01, sha384 = 0x02, sha512 = 0x03 };

// DHgroupID (NVME_AUTH_DHGROUP_*): RFC 7919 finite field groups, or none.
enum class DhGroupId : uint8_t {
  null = 0x00,  // no Diffie-Hellman exchange
  ffdhe2048 = 0x01,
  ffdhe3072 = 0x02,
  ffdhe4096 = 0x03,
  ffdhe6144 = 0x04,
  ffdhe8192 = 0x05,
};

// SC_C: secure channel concatenation (NVME_AUTH_SECP_*, TP 8018).
enum class SecureChannel : uint8_t {
  none = 0x00,             // NOSC: no secure channel concatenation
  sc = 0x01,               // SC
  new_tls_psk = 0x02,      // NEWTLSPSK: generate a TLS PSK from this exchange
  replace_tls_psk = 0x03,  // REPLACETLSPSK
};

// AUTH_Failure REASON CODE (NVME_AUTH_DHCHAP_FAILURE_REASON_FAILED): the only one defined.
inline constexpr uint8_t kFailureReasonFailed = 0x01;

// AUTH_Failure REASON CODE EXPLANATION (NVME_AUTH_DHCHAP_FAILURE_*).
enum class FailureExplanation : uint8_t {
  failed = 0x01,              // authentication failed (a wrong response, an internal error)
  protocol_unusable = 0x02,   // no usable authentication protocol (NOT_USABLE)
  concat_mismatch = 0x03,     // secure channel concatenation mismatch
  hash_unusable = 0x04,       // hash function not usable
  dhgroup_unusable = 0x05,    // DH group not usable
  incorrect_payload = 0x06,   // message fields or length wrong
  incorrect_message = 0x07,   // unexpected message (type / id / sequence)
};

// Digest length of a hash function in bytes (NVME_AUTH_MAX_DIGEST_SIZE is 64); 0 for an unknown id.
constexpr std::size_t hash_length(HashId id) noexcept {
  switch (id) {
    case HashId::sha256: return 32;
    case HashId::sha384: return 48;
    case HashId::sha512: return 64;
  }
  return 0;
}
inline constexpr std::size_t kMaxHashLength = 64;

// Length of a DH value (g^x mod p, big-endian, padded) for a group: the size of its prime. 0 for null or an
// unknown id.
constexpr std::size_t dh_value_length(DhGroupId id) noexcept {
  switch (id) {
    case DhGroupId::null: return 0;
    case DhGroupId::ffdhe2048: return 256;
    case DhGroupId::ffdhe3072: return 384;
    case DhGroupId::ffdhe4096: return 512;
    case DhGroupId::ffdhe6144: return 768;
    case DhGroupId::ffdhe8192: return 1024;
  }
  return 0;
}
inline constexpr std::size_t kMaxDhValueLength = 1024;

constexpr bool is_known_hash(uint8_t id) noexcept { return id >= 0x01 && id <= 0x03; }
constexpr bool is_known_dh_group(uint8_t id) noexcept { return id <= 0x05; }

// ---------------------------------------------------------------------------------------------------------
// Message layouts (the fixed part of each message; variable fields follow it)
// ---------------------------------------------------------------------------------------------------------

// Every message starts with AUTH_TYPE, AUTH_ID, two reserved bytes and T_ID.
struct MessageHeader {
  uint8_t auth_type;  // 0 AuthType
  uint8_t auth_id;    // 1 MessageId
  le16 rsvd2;         // 2
  le16 t_id;          // 4 transaction identifier, chosen by the host in AUTH_Negotiate
};
static_assert(sizeof(MessageHeader) == 6);
static_assert(offsetof(MessageHeader, auth_type) == 0);
static_assert(offsetof(MessageHeader, auth_id) == 1);
static_assert(offsetof(MessageHeader, rsvd2) == 2);
static_assert(offsetof(MessageHeader, t_id) == 4);

// AUTH_Negotiate (nvmf_auth_dhchap_negotiate_data), followed by NAPD protocol descriptors.
struct NegotiateHeader {
  MessageHeader hdr;  // 0 AUTH_TYPE, AUTH_ID (00h negotiate), T_ID
  uint8_t sc_c;       // 6 secure channel concatenation (SecureChannel)
  uint8_t napd;       // 7 number of authentication protocol descriptors
};
static_assert(sizeof(NegotiateHeader) == 8);
static_assert(offsetof(NegotiateHeader, hdr) == 0);
static_assert(offsetof(NegotiateHeader, sc_c) == 6);
static_assert(offsetof(NegotiateHeader, napd) == 7);

inline constexpr std::size_t kMaxIdListLength = 30;

// DH-HMAC-CHAP protocol descriptor (nvmf_auth_dhchap_protocol_descriptor: idlist[0..29] hash ids,
// idlist[30..59] DH group ids).
struct ProtocolDescriptor {
  uint8_t authid;                                       // 0  01h DH-HMAC-CHAP
  uint8_t rsvd1;                                        // 1
  uint8_t halen;                                        // 2  number of hash ids (<= 30)
  uint8_t dhlen;                                        // 3  number of DH group ids (<= 30)
  std::array<uint8_t, kMaxIdListLength> hash_ids;       // 4  HashIDList
  std::array<uint8_t, kMaxIdListLength> dh_group_ids;   // 34 DHgIDList
};
static_assert(sizeof(ProtocolDescriptor) == 64);
static_assert(offsetof(ProtocolDescriptor, authid) == 0);
static_assert(offsetof(ProtocolDescriptor, rsvd1) == 1);
static_assert(offsetof(ProtocolDescriptor, halen) == 2);
static_assert(offsetof(ProtocolDescriptor, dhlen) == 3);
static_assert(offsetof(ProtocolDescriptor, hash_ids) == 4);
static_assert(offsetof(ProtocolDescriptor, dh_group_ids) == 34);

// DH-HMAC-CHAP_Challenge (nvmf_auth_dhchap_challenge_data), followed by HL bytes of challenge value C1 and
// DHVLEN bytes of DH value.
struct ChallengeHeader {
  MessageHeader hdr;  // 0  AUTH_TYPE, AUTH_ID (01h challenge), T_ID
  uint8_t hl;         // 6  hash length
  uint8_t rsvd7;      // 7
  uint8_t hashid;     // 8  chosen hash function
  uint8_t dhgid;      // 9  chosen DH group
  le16 dhvlen;        // 10 DH value length
  le32 seqnum;        // 12 sequence number S1
};
static_assert(sizeof(ChallengeHeader) == 16);
static_assert(offsetof(ChallengeHeader, hdr) == 0);
static_assert(offsetof(ChallengeHeader, hl) == 6);
static_assert(offsetof(ChallengeHeader, rsvd7) == 7);
static_assert(offsetof(ChallengeHeader, hashid) == 8);
static_assert(offsetof(ChallengeHeader, dhgid) == 9);
static_assert(offsetof(ChallengeHeader, dhvlen) == 10);
static_assert(offsetof(ChallengeHeader, seqnum) == 12);

// DH-HMAC-CHAP_Reply (nvmf_auth_dhchap_reply_data), followed by HL bytes of response R1, HL bytes of
// challenge C2 (meaningful when CVALID) and DHVLEN bytes of DH value.
struct ReplyHeader {
  MessageHeader hdr;  // 0  AUTH_TYPE, AUTH_ID (02h reply), T_ID
  uint8_t hl;         // 6  hash length
  uint8_t rsvd7;      // 7
  uint8_t cvalid;     // 8  bit 0: C2 valid (the host wants the controller authenticated)
  uint8_t rsvd9;      // 9
  le16 dhvlen;        // 10 DH value length
  le32 seqnum;        // 12 sequence number S2
};
static_assert(sizeof(ReplyHeader) == 16);
static_assert(offsetof(ReplyHeader, hdr) == 0);
static_assert(offsetof(ReplyHeader, hl) == 6);
static_assert(offsetof(ReplyHeader, rsvd7) == 7);
static_assert(offsetof(ReplyHeader, cvalid) == 8);
static_assert(offsetof(ReplyHeader, rsvd9) == 9);
static_assert(offsetof(ReplyHeader, dhvlen) == 10);
static_assert(offsetof(ReplyHeader, seqnum) == 12);

// DH-HMAC-CHAP_Success1 (nvmf_auth_dhchap_success1_data), followed by HL bytes of response R2.
struct Success1Header {
  MessageHeader hdr;  // 0 AUTH_TYPE, AUTH_ID (03h success1), T_ID
  uint8_t hl;                     // 6 hash length
  uint8_t rsvd7;                  // 7
  uint8_t rvalid;                 // 8 bit 0: R2 valid
  std::array<uint8_t, 7> rsvd9;   // 9
};
static_assert(sizeof(Success1Header) == 16);
static_assert(offsetof(Success1Header, hdr) == 0);
static_assert(offsetof(Success1Header, hl) == 6);
static_assert(offsetof(Success1Header, rsvd7) == 7);
static_assert(offsetof(Success1Header, rvalid) == 8);
static_assert(offsetof(Success1Header, rsvd9) == 9);

// DH-HMAC-CHAP_Success2 (nvmf_auth_dhchap_success2_data).
struct Success2Message {
  MessageHeader hdr;  // 0 AUTH_TYPE, AUTH_ID (04h success2), T_ID
  std::array<uint8_t, 10> rsvd6;  // 6
};
static_assert(sizeof(Success2Message) == 16);
static_assert(offsetof(Success2Message, hdr) == 0);
static_assert(offsetof(Success2Message, rsvd6) == 6);

// AUTH_Failure1 / AUTH_Failure2 (nvmf_auth_dhchap_failure_data).
struct FailureMessage {
  MessageHeader hdr;  // 0 AUTH_TYPE, AUTH_ID (F1h failure1 / F0h failure2), T_ID
  uint8_t rescode;      // 6 reason code: 01h
  uint8_t rescode_exp;  // 7 reason code explanation (FailureExplanation)
};
static_assert(sizeof(FailureMessage) == 8);
static_assert(offsetof(FailureMessage, hdr) == 0);
static_assert(offsetof(FailureMessage, rescode) == 6);
static_assert(offsetof(FailureMessage, rescode_exp) == 7);

static_assert(WireLayout<MessageHeader> && WireLayout<NegotiateHeader>);
static_assert(WireLayout<ProtocolDescriptor> && WireLayout<ChallengeHeader>);
static_assert(WireLayout<ReplyHeader> && WireLayout<Success1Header>);
static_assert(WireLayout<Success2Message> && WireLayout<FailureMessage>);

// ---------------------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------------------

// Why a message (or an exchange step) was refused: the explanation to put in AUTH_Failure1/2, the byte
// offset of the offending field in the message, and a human reason (a string literal: no allocation).
struct AuthError {
  FailureExplanation explanation;
  uint32_t offset;
  const char* what;
};

template <typename T>
using AuthResult = tl::expected<T, AuthError>;

inline tl::unexpected<AuthError> auth_reject(FailureExplanation explanation, uint32_t offset,
                                             const char* what) noexcept {
  return tl::unexpected<AuthError>(AuthError{explanation, offset, what});
}

// ---------------------------------------------------------------------------------------------------------
// Decoded messages (spans point into the decoded buffer)
// ---------------------------------------------------------------------------------------------------------

// The first six bytes of any message, to pick the decoder (and to check T_ID before decoding).
struct Header {
  AuthType auth_type;
  MessageId auth_id;
  uint16_t t_id;
};

struct Negotiate {
  uint16_t t_id = 0;
  SecureChannel sc_c = SecureChannel::none;
  uint8_t napd = 0;
  // The DH-HMAC-CHAP descriptor's lists, as sent (unknown ids included: the selection ignores them).
  std::array<uint8_t, kMaxIdListLength> hash_ids{};
  uint8_t hash_count = 0;
  std::array<uint8_t, kMaxIdListLength> dh_group_ids{};
  uint8_t dh_group_count = 0;

  std::span<const uint8_t> hashes() const noexcept { return {hash_ids.data(), hash_count}; }
  std::span<const uint8_t> dh_groups() const noexcept { return {dh_group_ids.data(), dh_group_count}; }
  bool offers(HashId id) const noexcept;
  bool offers(DhGroupId id) const noexcept;
};

struct Challenge {
  uint16_t t_id = 0;
  HashId hash = HashId::sha256;
  DhGroupId dh_group = DhGroupId::null;
  uint32_t seqnum = 0;                 // S1
  std::span<const uint8_t> challenge;  // C1, hash_length(hash) bytes
  std::span<const uint8_t> dh_value;   // g^x mod p, dh_value_length(dh_group) bytes (empty for null)
};

struct Reply {
  uint16_t t_id = 0;
  uint8_t hl = 0;
  bool cvalid = false;                 // the host asks the controller to authenticate itself
  uint32_t seqnum = 0;                 // S2 (meaningful when cvalid)
  std::span<const uint8_t> response;   // R1, hl bytes
  std::span<const uint8_t> challenge;  // C2, hl bytes (meaningful when cvalid)
  std::span<const uint8_t> dh_value;   // g^y mod p, empty when no DH group is used
};

struct Success1 {
  uint16_t t_id = 0;
  uint8_t hl = 0;
  bool rvalid = false;
  std::span<const uint8_t> response;  // R2, hl bytes when rvalid, else empty
};

struct Success2 {
  uint16_t t_id = 0;
};

struct Failure {
  MessageId auth_id = MessageId::failure1;  // failure1 (from the controller) or failure2 (from the host)
  uint16_t t_id = 0;
  uint8_t reason = kFailureReasonFailed;     // as received
  uint8_t explanation = 0;                   // as received (normally a FailureExplanation)
};

// Message sizes as the fields say (what an encoder writes and a decoder requires).
constexpr std::size_t negotiate_size(uint8_t napd) noexcept {
  return sizeof(NegotiateHeader) + std::size_t{napd} * sizeof(ProtocolDescriptor);
}
constexpr std::size_t challenge_size(std::size_t hl, std::size_t dhvlen) noexcept {
  return sizeof(ChallengeHeader) + hl + dhvlen;
}
constexpr std::size_t reply_size(std::size_t hl, std::size_t dhvlen) noexcept {
  return sizeof(ReplyHeader) + 2 * hl + dhvlen;
}
constexpr std::size_t success1_size(std::size_t hl) noexcept { return sizeof(Success1Header) + hl; }

// ---------------------------------------------------------------------------------------------------------
// Decoders. `in` is the transferred data: the decoders accept trailing bytes past the message (an
// Authentication Receive buffer is usually larger than the message in it); a controller that wants TL to
// match exactly compares TL with the *_size() of the decoded message.
// ---------------------------------------------------------------------------------------------------------

// Shorter than 6 bytes -> incorrect_payload; an AUTH_TYPE other than 00h/01h -> incorrect_message.
AuthResult<Header> decode_header(std::span<const uint8_t> in) noexcept;

// AUTH_Negotiate. NAPD 0 or no DH-HMAC-CHAP descriptor -> protocol_unusable; HALEN or DHLEN over 30 or
// the descriptors past the data -> incorrect_payload. SC_C is returned as received (the caller answers
// concat_mismatch for a value it does not do). Empty or unknown-only lists are left to the selection.
AuthResult<Negotiate> decode_negotiate(std::span<const uint8_t> in) noexcept;

// DH-HMAC-CHAP_Challenge. Unknown HashID or HL not its digest length -> hash_unusable; unknown DHgroupID ->
// dhgroup_unusable; a DH value with the null group, or DHVLEN not the group's size -> incorrect_payload.
AuthResult<Challenge> decode_challenge(std::span<const uint8_t> in) noexcept;

// DH-HMAC-CHAP_Reply. HL not 32/48/64 -> hash_unusable; CVALID not 0/1, DHVLEN not 0 or a group size, or
// the values past the data -> incorrect_payload. Whether HL and DHVLEN match the ones the controller chose
// is for the caller (it knows them).
AuthResult<Reply> decode_reply(std::span<const uint8_t> in) noexcept;

// DH-HMAC-CHAP_Success1. HL not 32/48/64 -> hash_unusable; RVALID not 0/1 or R2 past the data ->
// incorrect_payload.
AuthResult<Success1> decode_success1(std::span<const uint8_t> in) noexcept;

AuthResult<Success2> decode_success2(std::span<const uint8_t> in) noexcept;

// AUTH_Failure1 / AUTH_Failure2. AUTH_TYPE 01h is accepted too: kernels before 6.x sent Failure2 as a
// DH-HMAC-CHAP message.
AuthResult<Failure> decode_failure(std::span<const uint8_t> in) noexcept;

// Controller side choice from an AUTH_Negotiate: the first entry of `preference` (the controller's
// allowed list, best first) that the host offers; none -> hash_unusable / dhgroup_unusable.
AuthResult<HashId> select_hash(const Negotiate& negotiate, std::span<const HashId> preference) noexcept;
AuthResult<DhGroupId> select_dh_group(const Negotiate& negotiate, std::span<const DhGroupId> preference) noexcept;

// ---------------------------------------------------------------------------------------------------------
// Encoders: write one message at the start of `out` and return its size. A buffer too small, or lists /
// values of sizes the format cannot carry, -> incorrect_payload (as the kernel answers when its buffer is
// too small), nothing promised about `out`.
// ---------------------------------------------------------------------------------------------------------

// One DH-HMAC-CHAP descriptor (NAPD 1), as every host sends.
AuthResult<std::size_t> encode_negotiate(std::span<uint8_t> out, uint16_t t_id, SecureChannel sc_c,
                                         std::span<const HashId> hashes,
                                         std::span<const DhGroupId> dh_groups) noexcept;

// `challenge` must be hash_length(hash) bytes, `dh_value` dh_value_length(dh_group) bytes.
AuthResult<std::size_t> encode_challenge(std::span<uint8_t> out, uint16_t t_id, HashId hash, DhGroupId dh_group,
                                         uint32_t seqnum, std::span<const uint8_t> challenge,
                                         std::span<const uint8_t> dh_value) noexcept;

// `response` 32/48/64 bytes; `challenge` (C2) the same length when cvalid, empty otherwise (zeros are
// sent); `dh_value` empty or a group's size.
AuthResult<std::size_t> encode_reply(std::span<uint8_t> out, uint16_t t_id, std::span<const uint8_t> response,
                                     bool cvalid, uint32_t seqnum, std::span<const uint8_t> challenge,
                                     std::span<const uint8_t> dh_value) noexcept;

// `hl` the hash length in use; `response` (R2) hl bytes, or empty for RVALID 0 (the field is then zeros:
// the kernel's nvmet always sends HL bytes of it).
AuthResult<std::size_t> encode_success1(std::span<uint8_t> out, uint16_t t_id, uint8_t hl,
                                        std::span<const uint8_t> response) noexcept;

AuthResult<std::size_t> encode_success2(std::span<uint8_t> out, uint16_t t_id) noexcept;

// `auth_id` failure1 or failure2; reason code 01h.
AuthResult<std::size_t> encode_failure(std::span<uint8_t> out, MessageId auth_id, uint16_t t_id,
                                       FailureExplanation explanation) noexcept;

const char* to_string(FailureExplanation explanation) noexcept;

}  // namespace rdmablk::protocol::auth
