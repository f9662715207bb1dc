#include "protocol/auth.h"

#include <algorithm>
#include <cstring>

#include "protocol/command.h"
#include "protocol/fabrics.h"

namespace rdmablk::protocol::auth {

namespace {

template <typename T>
T auth_command(FabricsType type, uint16_t cid, const SglDescriptor& dptr) noexcept {
  T c{};
  c.opcode = kFabricsOpcode;
  c.flags = static_cast<uint8_t>(static_cast<unsigned>(Psdt::sgl_mptr_contiguous) << kSqePsdtShift);
  c.cid.set(cid);
  c.fctype = static_cast<uint8_t>(type);
  c.dptr = dptr;
  c.spsp0 = kSpsp0Dhchap;
  c.spsp1 = kSpsp1Dhchap;
  c.secp = kSecpNvme;
  return c;
}

template <typename T>
Decoded<uint32_t> check_command(const T& cmd, uint32_t length, uint32_t length_offset) noexcept {
  if (cmd.secp != kSecpNvme) return reject(offsetof(T, secp), "SECP is not E9h (NVMe in-band authentication)");
  if (cmd.spsp0 != kSpsp0Dhchap) return reject(offsetof(T, spsp0), "SPSP0 is not 01h");
  if (cmd.spsp1 != kSpsp1Dhchap) return reject(offsetof(T, spsp1), "SPSP1 is not 01h");
  if (length == 0) return reject(length_offset, "transfer length is 0");
  return length;
}

constexpr uint32_t u32(std::size_t v) noexcept { return static_cast<uint32_t>(v); }

// A hash length on the wire is one of the three digest sizes.
constexpr bool is_hash_length(std::size_t hl) noexcept { return hl == 32 || hl == 48 || hl == 64; }

// A DH value length on the wire is 0 (no exchange) or one of the group sizes.
constexpr bool is_dh_value_length(std::size_t len) noexcept {
  return len == 0 || len == 256 || len == 384 || len == 512 || len == 768 || len == 1024;
}

// The message is of the expected class and id; shorter than its fixed part is an incorrect payload.
template <typename T>
AuthResult<T> load_fixed(std::span<const uint8_t> in, AuthType type, MessageId id) noexcept {
  if (in.size() < sizeof(MessageHeader)) {
    return auth_reject(FailureExplanation::incorrect_payload, 0, "message shorter than its 6-byte header");
  }
  if (in[0] != static_cast<uint8_t>(type)) {
    return auth_reject(FailureExplanation::incorrect_message, 0, "unexpected AUTH_TYPE");
  }
  if (in[1] != static_cast<uint8_t>(id)) {
    return auth_reject(FailureExplanation::incorrect_message, 1, "unexpected AUTH_ID");
  }
  if (in.size() < sizeof(T)) {
    return auth_reject(FailureExplanation::incorrect_payload, u32(in.size()), "message shorter than its fixed part");
  }
  return load<T>(in.data());
}

tl::unexpected<AuthError> too_small() noexcept {
  return auth_reject(FailureExplanation::incorrect_payload, 0, "buffer too small for the message");
}

void copy_to(std::span<uint8_t> out, std::size_t at, std::span<const uint8_t> bytes) noexcept {
  if (!bytes.empty()) std::memcpy(out.data() + at, bytes.data(), bytes.size());
}

// The six bytes every encoded message starts with.
constexpr MessageHeader message_header(AuthType type, MessageId id, uint16_t t_id) noexcept {
  MessageHeader h{};
  h.auth_type = static_cast<uint8_t>(type);
  h.auth_id = static_cast<uint8_t>(id);
  h.t_id.set(t_id);
  return h;
}

}  // namespace

AuthenticationSendCommand make_authentication_send(uint16_t cid, uint32_t tl, const SglDescriptor& dptr) noexcept {
  auto c = auth_command<AuthenticationSendCommand>(FabricsType::authentication_send, cid, dptr);
  c.tl.set(tl);
  return c;
}

AuthenticationReceiveCommand make_authentication_receive(uint16_t cid, uint32_t al,
                                                         const SglDescriptor& dptr) noexcept {
  auto c = auth_command<AuthenticationReceiveCommand>(FabricsType::authentication_receive, cid, dptr);
  c.al.set(al);
  return c;
}

Decoded<uint32_t> check_authentication_send(const AuthenticationSendCommand& cmd) noexcept {
  return check_command(cmd, cmd.tl.get(), offsetof(AuthenticationSendCommand, tl));
}

Decoded<uint32_t> check_authentication_receive(const AuthenticationReceiveCommand& cmd) noexcept {
  return check_command(cmd, cmd.al.get(), offsetof(AuthenticationReceiveCommand, al));
}

bool Negotiate::offers(HashId id) const noexcept {
  const auto list = hashes();
  return std::find(list.begin(), list.end(), static_cast<uint8_t>(id)) != list.end();
}

bool Negotiate::offers(DhGroupId id) const noexcept {
  const auto list = dh_groups();
  return std::find(list.begin(), list.end(), static_cast<uint8_t>(id)) != list.end();
}

AuthResult<Header> decode_header(std::span<const uint8_t> in) noexcept {
  if (in.size() < sizeof(MessageHeader)) {
    return auth_reject(FailureExplanation::incorrect_payload, 0, "message shorter than its 6-byte header");
  }
  const auto h = load<MessageHeader>(in.data());
  if (h.auth_type != static_cast<uint8_t>(AuthType::common) && h.auth_type != static_cast<uint8_t>(AuthType::dhchap)) {
    return auth_reject(FailureExplanation::incorrect_message, 0, "unknown AUTH_TYPE");
  }
  return Header{static_cast<AuthType>(h.auth_type), static_cast<MessageId>(h.auth_id), h.t_id.get()};
}

AuthResult<Negotiate> decode_negotiate(std::span<const uint8_t> in) noexcept {
  auto h = load_fixed<NegotiateHeader>(in, AuthType::common, MessageId::negotiate);
  if (!h) return tl::unexpected(h.error());
  Negotiate out;
  out.t_id = h->hdr.t_id.get();
  out.sc_c = static_cast<SecureChannel>(h->sc_c);
  out.napd = h->napd;
  if (h->napd == 0) {
    return auth_reject(FailureExplanation::protocol_unusable, offsetof(NegotiateHeader, napd),
                       "no authentication protocol descriptor (NAPD 0)");
  }
  if (in.size() < negotiate_size(h->napd)) {
    return auth_reject(FailureExplanation::incorrect_payload, u32(in.size()),
                       "NAPD descriptors run past the data");
  }
  for (uint8_t i = 0; i < h->napd; ++i) {
    const std::size_t at = sizeof(NegotiateHeader) + std::size_t{i} * sizeof(ProtocolDescriptor);
    const auto d = load<ProtocolDescriptor>(in.data() + at);
    if (d.authid != kDhchapAuthId) continue;  // another protocol: not ours to judge
    if (d.halen > kMaxIdListLength) {
      return auth_reject(FailureExplanation::incorrect_payload, u32(at + offsetof(ProtocolDescriptor, halen)),
                         "HALEN over 30");
    }
    if (d.dhlen > kMaxIdListLength) {
      return auth_reject(FailureExplanation::incorrect_payload, u32(at + offsetof(ProtocolDescriptor, dhlen)),
                         "DHLEN over 30");
    }
    out.hash_ids = d.hash_ids;
    out.hash_count = d.halen;
    out.dh_group_ids = d.dh_group_ids;
    out.dh_group_count = d.dhlen;
    return out;
  }
  return auth_reject(FailureExplanation::protocol_unusable, sizeof(NegotiateHeader),
                     "no DH-HMAC-CHAP protocol descriptor");
}

AuthResult<Challenge> decode_challenge(std::span<const uint8_t> in) noexcept {
  auto h = load_fixed<ChallengeHeader>(in, AuthType::dhchap, MessageId::challenge);
  if (!h) return tl::unexpected(h.error());
  if (!is_known_hash(h->hashid)) {
    return auth_reject(FailureExplanation::hash_unusable, offsetof(ChallengeHeader, hashid), "unknown HashID");
  }
  const auto hash = static_cast<HashId>(h->hashid);
  if (h->hl != hash_length(hash)) {
    return auth_reject(FailureExplanation::hash_unusable, offsetof(ChallengeHeader, hl),
                       "HL is not the digest length of HashID");
  }
  if (!is_known_dh_group(h->dhgid)) {
    return auth_reject(FailureExplanation::dhgroup_unusable, offsetof(ChallengeHeader, dhgid), "unknown DHgroupID");
  }
  const auto group = static_cast<DhGroupId>(h->dhgid);
  const std::size_t dhvlen = h->dhvlen.get();
  if (group == DhGroupId::null && dhvlen != 0) {
    return auth_reject(FailureExplanation::incorrect_payload, offsetof(ChallengeHeader, dhvlen),
                       "DH value with the null DH group");
  }
  if (dhvlen != dh_value_length(group)) {
    return auth_reject(FailureExplanation::incorrect_payload, offsetof(ChallengeHeader, dhvlen),
                       "DHVLEN is not the size of the DH group");
  }
  if (in.size() < challenge_size(h->hl, dhvlen)) {
    return auth_reject(FailureExplanation::incorrect_payload, u32(in.size()),
                       "challenge or DH value runs past the data");
  }
  Challenge out;
  out.t_id = h->hdr.t_id.get();
  out.hash = hash;
  out.dh_group = group;
  out.seqnum = h->seqnum.get();
  out.challenge = in.subspan(sizeof(ChallengeHeader), h->hl);
  out.dh_value = in.subspan(sizeof(ChallengeHeader) + h->hl, dhvlen);
  return out;
}

AuthResult<Reply> decode_reply(std::span<const uint8_t> in) noexcept {
  auto h = load_fixed<ReplyHeader>(in, AuthType::dhchap, MessageId::reply);
  if (!h) return tl::unexpected(h.error());
  if (!is_hash_length(h->hl)) {
    return auth_reject(FailureExplanation::hash_unusable, offsetof(ReplyHeader, hl), "HL is not 32, 48 or 64");
  }
  if (h->cvalid > 1) {
    return auth_reject(FailureExplanation::incorrect_payload, offsetof(ReplyHeader, cvalid), "CVALID is not 0 or 1");
  }
  const std::size_t dhvlen = h->dhvlen.get();
  if (!is_dh_value_length(dhvlen)) {
    return auth_reject(FailureExplanation::incorrect_payload, offsetof(ReplyHeader, dhvlen),
                       "DHVLEN is not the size of a DH group");
  }
  if (in.size() < reply_size(h->hl, dhvlen)) {
    return auth_reject(FailureExplanation::incorrect_payload, u32(in.size()),
                       "response, challenge or DH value runs past the data");
  }
  Reply out;
  out.t_id = h->hdr.t_id.get();
  out.hl = h->hl;
  out.cvalid = h->cvalid == 1;
  out.seqnum = h->seqnum.get();
  out.response = in.subspan(sizeof(ReplyHeader), h->hl);
  out.challenge = in.subspan(sizeof(ReplyHeader) + h->hl, h->hl);
  out.dh_value = in.subspan(sizeof(ReplyHeader) + 2 * std::size_t{h->hl}, dhvlen);
  return out;
}

AuthResult<Success1> decode_success1(std::span<const uint8_t> in) noexcept {
  auto h = load_fixed<Success1Header>(in, AuthType::dhchap, MessageId::success1);
  if (!h) return tl::unexpected(h.error());
  if (!is_hash_length(h->hl)) {
    return auth_reject(FailureExplanation::hash_unusable, offsetof(Success1Header, hl), "HL is not 32, 48 or 64");
  }
  if (h->rvalid > 1) {
    return auth_reject(FailureExplanation::incorrect_payload, offsetof(Success1Header, rvalid),
                       "RVALID is not 0 or 1");
  }
  Success1 out;
  out.t_id = h->hdr.t_id.get();
  out.hl = h->hl;
  out.rvalid = h->rvalid == 1;
  if (out.rvalid) {
    if (in.size() < success1_size(h->hl)) {
      return auth_reject(FailureExplanation::incorrect_payload, u32(in.size()), "response runs past the data");
    }
    out.response = in.subspan(sizeof(Success1Header), h->hl);
  }
  return out;
}

AuthResult<Success2> decode_success2(std::span<const uint8_t> in) noexcept {
  auto h = load_fixed<Success2Message>(in, AuthType::dhchap, MessageId::success2);
  if (!h) return tl::unexpected(h.error());
  return Success2{h->hdr.t_id.get()};
}

AuthResult<Failure> decode_failure(std::span<const uint8_t> in) noexcept {
  if (in.size() < sizeof(MessageHeader)) {
    return auth_reject(FailureExplanation::incorrect_payload, 0, "message shorter than its 6-byte header");
  }
  if (in[0] != static_cast<uint8_t>(AuthType::common) && in[0] != static_cast<uint8_t>(AuthType::dhchap)) {
    return auth_reject(FailureExplanation::incorrect_message, 0, "unexpected AUTH_TYPE");
  }
  if (in[1] != static_cast<uint8_t>(MessageId::failure1) && in[1] != static_cast<uint8_t>(MessageId::failure2)) {
    return auth_reject(FailureExplanation::incorrect_message, 1, "AUTH_ID is not Failure1 or Failure2");
  }
  if (in.size() < sizeof(FailureMessage)) {
    return auth_reject(FailureExplanation::incorrect_payload, u32(in.size()), "message shorter than its fixed part");
  }
  const auto m = load<FailureMessage>(in.data());
  return Failure{static_cast<MessageId>(m.hdr.auth_id), m.hdr.t_id.get(), m.rescode, m.rescode_exp};
}

AuthResult<HashId> select_hash(const Negotiate& negotiate, std::span<const HashId> preference) noexcept {
  for (HashId id : preference) {
    if (is_known_hash(static_cast<uint8_t>(id)) && negotiate.offers(id)) return id;
  }
  return auth_reject(FailureExplanation::hash_unusable,
                     sizeof(NegotiateHeader) + offsetof(ProtocolDescriptor, hash_ids),
                     "no hash function both sides allow");
}

AuthResult<DhGroupId> select_dh_group(const Negotiate& negotiate, std::span<const DhGroupId> preference) noexcept {
  for (DhGroupId id : preference) {
    if (is_known_dh_group(static_cast<uint8_t>(id)) && negotiate.offers(id)) return id;
  }
  return auth_reject(FailureExplanation::dhgroup_unusable,
                     sizeof(NegotiateHeader) + offsetof(ProtocolDescriptor, dh_group_ids),
                     "no DH group both sides allow");
}

AuthResult<std::size_t> encode_negotiate(std::span<uint8_t> out, uint16_t t_id, SecureChannel sc_c,
                                         std::span<const HashId> hashes,
                                         std::span<const DhGroupId> dh_groups) noexcept {
  if (hashes.size() > kMaxIdListLength || dh_groups.size() > kMaxIdListLength) {
    return auth_reject(FailureExplanation::incorrect_payload, 0, "more than 30 hash or DH group ids");
  }
  const std::size_t size = negotiate_size(1);
  if (out.size() < size) return too_small();
  NegotiateHeader h{};
  h.hdr = message_header(AuthType::common, MessageId::negotiate, t_id);
  h.sc_c = static_cast<uint8_t>(sc_c);
  h.napd = 1;
  ProtocolDescriptor d{};
  d.authid = kDhchapAuthId;
  d.halen = static_cast<uint8_t>(hashes.size());
  d.dhlen = static_cast<uint8_t>(dh_groups.size());
  for (std::size_t i = 0; i < hashes.size(); ++i) d.hash_ids[i] = static_cast<uint8_t>(hashes[i]);
  for (std::size_t i = 0; i < dh_groups.size(); ++i) d.dh_group_ids[i] = static_cast<uint8_t>(dh_groups[i]);
  store(out.data(), h);
  store(out.data() + sizeof(h), d);
  return size;
}

AuthResult<std::size_t> encode_challenge(std::span<uint8_t> out, uint16_t t_id, HashId hash, DhGroupId dh_group,
                                         uint32_t seqnum, std::span<const uint8_t> challenge,
                                         std::span<const uint8_t> dh_value) noexcept {
  const std::size_t hl = hash_length(hash);
  if (hl == 0) return auth_reject(FailureExplanation::hash_unusable, 0, "unknown hash id");
  if (!is_known_dh_group(static_cast<uint8_t>(dh_group))) {
    return auth_reject(FailureExplanation::dhgroup_unusable, 0, "unknown DH group id");
  }
  if (challenge.size() != hl) {
    return auth_reject(FailureExplanation::incorrect_payload, 0, "challenge is not the hash length");
  }
  if (dh_value.size() != dh_value_length(dh_group)) {
    return auth_reject(FailureExplanation::incorrect_payload, 0, "DH value is not the size of the group");
  }
  const std::size_t size = challenge_size(hl, dh_value.size());
  if (out.size() < size) return too_small();
  ChallengeHeader h{};
  h.hdr = message_header(AuthType::dhchap, MessageId::challenge, t_id);
  h.hl = static_cast<uint8_t>(hl);
  h.hashid = static_cast<uint8_t>(hash);
  h.dhgid = static_cast<uint8_t>(dh_group);
  h.dhvlen.set(static_cast<uint16_t>(dh_value.size()));
  h.seqnum.set(seqnum);
  store(out.data(), h);
  copy_to(out, sizeof(h), challenge);
  copy_to(out, sizeof(h) + hl, dh_value);
  return size;
}

AuthResult<std::size_t> encode_reply(std::span<uint8_t> out, uint16_t t_id, std::span<const uint8_t> response,
                                     bool cvalid, uint32_t seqnum, std::span<const uint8_t> challenge,
                                     std::span<const uint8_t> dh_value) noexcept {
  const std::size_t hl = response.size();
  if (!is_hash_length(hl)) {
    return auth_reject(FailureExplanation::incorrect_payload, 0, "response is not 32/48/64 bytes");
  }
  if (cvalid ? challenge.size() != hl : !challenge.empty()) {
    return auth_reject(FailureExplanation::incorrect_payload, 0, "challenge C2 is not the response length");
  }
  if (!is_dh_value_length(dh_value.size())) {
    return auth_reject(FailureExplanation::incorrect_payload, 0, "DH value is not the size of a group");
  }
  const std::size_t size = reply_size(hl, dh_value.size());
  if (out.size() < size) return too_small();
  ReplyHeader h{};
  h.hdr = message_header(AuthType::dhchap, MessageId::reply, t_id);
  h.hl = static_cast<uint8_t>(hl);
  h.cvalid = cvalid ? 1 : 0;
  h.dhvlen.set(static_cast<uint16_t>(dh_value.size()));
  h.seqnum.set(seqnum);
  store(out.data(), h);
  copy_to(out, sizeof(h), response);
  std::memset(out.data() + sizeof(h) + hl, 0, hl);
  copy_to(out, sizeof(h) + hl, challenge);
  copy_to(out, sizeof(h) + 2 * hl, dh_value);
  return size;
}

AuthResult<std::size_t> encode_success1(std::span<uint8_t> out, uint16_t t_id, uint8_t hl,
                                        std::span<const uint8_t> response) noexcept {
  if (!is_hash_length(hl)) return auth_reject(FailureExplanation::incorrect_payload, 0, "HL is not 32/48/64");
  if (!response.empty() && response.size() != hl) {
    return auth_reject(FailureExplanation::incorrect_payload, 0, "response is not HL bytes");
  }
  const std::size_t size = success1_size(hl);
  if (out.size() < size) return too_small();
  Success1Header h{};
  h.hdr = message_header(AuthType::dhchap, MessageId::success1, t_id);
  h.hl = hl;
  h.rvalid = response.empty() ? 0 : 1;
  store(out.data(), h);
  std::memset(out.data() + sizeof(h), 0, hl);
  copy_to(out, sizeof(h), response);
  return size;
}

AuthResult<std::size_t> encode_success2(std::span<uint8_t> out, uint16_t t_id) noexcept {
  if (out.size() < sizeof(Success2Message)) return too_small();
  Success2Message m{};
  m.hdr = message_header(AuthType::dhchap, MessageId::success2, t_id);
  store(out.data(), m);
  return sizeof(m);
}

AuthResult<std::size_t> encode_failure(std::span<uint8_t> out, MessageId auth_id, uint16_t t_id,
                                       FailureExplanation explanation) noexcept {
  if (auth_id != MessageId::failure1 && auth_id != MessageId::failure2) {
    return auth_reject(FailureExplanation::incorrect_message, 0, "not a failure message id");
  }
  if (out.size() < sizeof(FailureMessage)) return too_small();
  FailureMessage m{};
  m.hdr = message_header(AuthType::common, auth_id, t_id);
  m.rescode = kFailureReasonFailed;
  m.rescode_exp = static_cast<uint8_t>(explanation);
  store(out.data(), m);
  return sizeof(m);
}

const char* to_string(FailureExplanation explanation) noexcept {
  switch (explanation) {
    case FailureExplanation::failed: return "authentication failed";
    case FailureExplanation::protocol_unusable: return "authentication protocol not usable";
    case FailureExplanation::concat_mismatch: return "secure channel concatenation mismatch";
    case FailureExplanation::hash_unusable: return "hash function not usable";
    case FailureExplanation::dhgroup_unusable: return "DH group not usable";
    case FailureExplanation::incorrect_payload: return "incorrect payload";
    case FailureExplanation::incorrect_message: return "incorrect protocol message";
  }
  return "unknown failure explanation";
}

}  // namespace rdmablk::protocol::auth
