// In-band authentication wire formats (protocol/auth.h): Authentication Send / Receive commands and the
// DH-HMAC-CHAP messages. Golden bytes follow the layouts of the Linux kernel's include/linux/nvme.h
// (nvmf_auth_*_command, nvmf_auth_dhchap_*_data) and what its host (drivers/nvme/host/auth.c) sends.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "protocol/auth.h"
#include "protocol/command.h"
#include "protocol/fabrics.h"

namespace rdmablk::protocol::auth {
namespace {

template <typename T>
std::vector<uint8_t> bytes_of(const T& v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

std::vector<uint8_t> pattern(std::size_t n, uint8_t start) {
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(start + i);
  return v;
}

// Every strict prefix of a valid message is refused with incorrect_payload (the decoder never reads past
// the span: the sanitizer build would catch it).
template <typename Decode>
void expect_every_prefix_refused(const std::vector<uint8_t>& msg, Decode decode) {
  for (std::size_t n = 0; n < msg.size(); ++n) {
    auto r = decode(std::span<const uint8_t>(msg.data(), n));
    ASSERT_FALSE(r) << "prefix of " << n << " of " << msg.size() << " bytes accepted";
    EXPECT_EQ(r.error().explanation, FailureExplanation::incorrect_payload) << n;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------------------

TEST(AuthCommand, SendGoldenBytes) {
  const auto cmd = make_authentication_send(0x0021, 72, make_keyed_sgl(0x2000, 72, 0xAABBCCDD));
  const auto b = bytes_of(cmd);
  EXPECT_EQ(b[0], 0x7F);  // fabrics
  EXPECT_EQ(b[1], 0x40);  // PSDT SGL
  EXPECT_EQ(b[2], 0x21);
  EXPECT_EQ(b[4], 0x05);  // FCTYPE Authentication Send
  EXPECT_EQ(b[40], 0x00);
  EXPECT_EQ(b[41], 0x01);  // SPSP0
  EXPECT_EQ(b[42], 0x01);  // SPSP1
  EXPECT_EQ(b[43], 0xE9);  // SECP
  EXPECT_EQ(b[44], 72);    // TL
  EXPECT_EQ(b[45], 0);
  for (std::size_t i = 48; i < 64; ++i) EXPECT_EQ(b[i], 0) << i;
  EXPECT_EQ(as<FabricsCommand>(to_sqe(cmd)).type(), FabricsType::authentication_send);
  auto tl = check_authentication_send(cmd);
  ASSERT_TRUE(tl);
  EXPECT_EQ(*tl, 72u);
}

TEST(AuthCommand, ReceiveGoldenBytes) {
  const auto cmd = make_authentication_receive(0x0102, 4096, make_keyed_sgl(0x3000, 4096, 1));
  const auto b = bytes_of(cmd);
  EXPECT_EQ(b[0], 0x7F);
  EXPECT_EQ(b[2], 0x02);
  EXPECT_EQ(b[3], 0x01);
  EXPECT_EQ(b[4], 0x06);  // FCTYPE Authentication Receive
  EXPECT_EQ(b[41], 0x01);
  EXPECT_EQ(b[42], 0x01);
  EXPECT_EQ(b[43], 0xE9);
  EXPECT_EQ(b[44], 0x00);  // AL 4096 = 0x1000
  EXPECT_EQ(b[45], 0x10);
  auto al = check_authentication_receive(cmd);
  ASSERT_TRUE(al);
  EXPECT_EQ(*al, 4096u);
}

TEST(AuthCommand, ChecksRefuseEachBadField) {
  const auto good = make_authentication_send(1, 72, make_keyed_sgl(0, 72, 0));
  auto c = good;
  c.secp = 0xEA;
  auto r = check_authentication_send(c);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().offset, 43u);
  c = good;
  c.spsp0 = 0;
  r = check_authentication_send(c);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().offset, 41u);
  c = good;
  c.spsp1 = 2;
  r = check_authentication_send(c);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().offset, 42u);
  c = good;
  c.tl.set(0);
  r = check_authentication_send(c);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().offset, 44u);
  auto rc = make_authentication_receive(1, 0, make_keyed_sgl(0, 0, 0));
  auto rr = check_authentication_receive(rc);
  ASSERT_FALSE(rr);
  EXPECT_EQ(rr.error().offset, 44u);
}

// ---------------------------------------------------------------------------------------------------------
// AUTH_Negotiate
// ---------------------------------------------------------------------------------------------------------

// What the kernel host sends (nvme_auth_set_dhchap_negotiate_data): NAPD 1, SHA-256/384/512, the null group
// and the five ffdhe groups, sc_c 0.
std::vector<uint8_t> kernel_negotiate(uint16_t t_id) {
  std::vector<uint8_t> m(8 + 64, 0);
  m[0] = 0x00;  // common
  m[1] = 0x00;  // negotiate
  m[4] = static_cast<uint8_t>(t_id);
  m[5] = static_cast<uint8_t>(t_id >> 8);
  m[6] = 0;  // sc_c
  m[7] = 1;  // napd
  m[8] = 0x01;  // authid DH-HMAC-CHAP
  m[10] = 3;    // halen
  m[11] = 6;    // dhlen
  m[12] = 1, m[13] = 2, m[14] = 3;
  for (uint8_t i = 0; i < 6; ++i) m[8 + 4 + 30 + i] = i;  // idlist[30..35] = 0..5
  return m;
}

TEST(AuthNegotiate, DecodesWhatTheKernelSends) {
  const auto m = kernel_negotiate(0x1234);
  auto n = decode_negotiate(m);
  ASSERT_TRUE(n) << n.error().what;
  EXPECT_EQ(n->t_id, 0x1234);
  EXPECT_EQ(n->sc_c, SecureChannel::none);
  EXPECT_EQ(n->napd, 1);
  EXPECT_EQ(std::vector<uint8_t>(n->hashes().begin(), n->hashes().end()), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(std::vector<uint8_t>(n->dh_groups().begin(), n->dh_groups().end()),
            (std::vector<uint8_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(n->offers(HashId::sha512));
  EXPECT_TRUE(n->offers(DhGroupId::null));
  EXPECT_TRUE(n->offers(DhGroupId::ffdhe8192));
  EXPECT_EQ(negotiate_size(n->napd), m.size());
}

TEST(AuthNegotiate, EncodesWhatTheKernelSends) {
  const HashId hashes[] = {HashId::sha256, HashId::sha384, HashId::sha512};
  const DhGroupId groups[] = {DhGroupId::null,      DhGroupId::ffdhe2048, DhGroupId::ffdhe3072,
                              DhGroupId::ffdhe4096, DhGroupId::ffdhe6144, DhGroupId::ffdhe8192};
  std::vector<uint8_t> out(200, 0xEE);
  auto n = encode_negotiate(out, 0x1234, SecureChannel::none, hashes, groups);
  ASSERT_TRUE(n);
  ASSERT_EQ(*n, 72u);
  out.resize(*n);
  EXPECT_EQ(out, kernel_negotiate(0x1234));
}

TEST(AuthNegotiate, RoundTripKeepsSecureChannelAndLists) {
  const HashId hashes[] = {HashId::sha384};
  const DhGroupId groups[] = {DhGroupId::ffdhe4096, DhGroupId::null};
  std::vector<uint8_t> out(72);
  ASSERT_TRUE(encode_negotiate(out, 9, SecureChannel::new_tls_psk, hashes, groups));
  auto n = decode_negotiate(out);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->t_id, 9);
  EXPECT_EQ(n->sc_c, SecureChannel::new_tls_psk);
  EXPECT_TRUE(n->offers(HashId::sha384));
  EXPECT_FALSE(n->offers(HashId::sha256));
  EXPECT_TRUE(n->offers(DhGroupId::ffdhe4096));
  EXPECT_FALSE(n->offers(DhGroupId::ffdhe2048));
}

TEST(AuthNegotiate, RefusesTruncatedAndInconsistent) {
  const auto good = kernel_negotiate(1);
  expect_every_prefix_refused(good, [](auto s) { return decode_negotiate(s); });

  auto m = good;
  m[7] = 0;  // NAPD 0
  auto r = decode_negotiate(std::span<const uint8_t>(m).first(8));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().explanation, FailureExplanation::protocol_unusable);

  m = good;
  m[7] = 2;  // NAPD 2 with one descriptor's worth of data
  r = decode_negotiate(m);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().explanation, FailureExplanation::incorrect_payload);

  m = good;
  m[8] = 0x02;  // not DH-HMAC-CHAP
  r = decode_negotiate(m);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().explanation, FailureExplanation::protocol_unusable);

  m = good;
  m[10] = 31;  // HALEN
  r = decode_negotiate(m);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().explanation, FailureExplanation::incorrect_payload);
  EXPECT_EQ(r.error().offset, 10u);

  m = good;
  m[11] = 255;  // DHLEN
  r = decode_negotiate(m);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().offset, 11u);

  m = good;
  m[0] = 0x01;  // a DH-HMAC-CHAP type for a common message
  r = decode_negotiate(m);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().explanation, FailureExplanation::incorrect_message);

  m = good;
  m[1] = 0x02;
  r = decode_negotiate(m);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().explanation, FailureExplanation::incorrect_message);
}

TEST(AuthNegotiate, FindsDhchapAmongOtherDescriptors) {
  std::vector<uint8_t> m(8 + 2 * 64, 0);
  m[7] = 2;
  m[8] = 0x7F;  // an unknown protocol first, with nonsense lengths: not ours to judge
  m[10] = 200;
  m[8 + 64] = 0x01;
  m[8 + 64 + 2] = 1;
  m[8 + 64 + 4] = 0x02;  // SHA-384
  auto n = decode_negotiate(m);
  ASSERT_TRUE(n) << n.error().what;
  EXPECT_EQ(n->hash_count, 1);
  EXPECT_TRUE(n->offers(HashId::sha384));
}

TEST(AuthNegotiate, EncoderRefusesTooMuch) {
  std::vector<HashId> many(31, HashId::sha256);
  std::vector<uint8_t> out(100);
  EXPECT_FALSE(encode_negotiate(out, 0, SecureChannel::none, many, {}));
  std::vector<uint8_t> small(71);
  auto r = encode_negotiate(small, 0, SecureChannel::none, {}, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().explanation, FailureExplanation::incorrect_payload);
}

TEST(AuthNegotiate, SelectsTheControllersFirstAllowedChoice) {
  const auto n = decode_negotiate(kernel_negotiate(1));
  ASSERT_TRUE(n);
  const HashId prefer_sha512[] = {HashId::sha512, HashId::sha256};
  auto h = select_hash(*n, prefer_sha512);
  ASSERT_TRUE(h);
  EXPECT_EQ(*h, HashId::sha512);
  const DhGroupId prefer_groups[] = {DhGroupId::ffdhe4096, DhGroupId::null};
  auto g = select_dh_group(*n, prefer_groups);
  ASSERT_TRUE(g);
  EXPECT_EQ(*g, DhGroupId::ffdhe4096);

  // A host offering only SHA-256 and the null group, a controller allowing SHA-512 and ffdhe groups only.
  const HashId host_hashes[] = {HashId::sha256};
  const DhGroupId host_groups[] = {DhGroupId::null};
  std::vector<uint8_t> m(72);
  ASSERT_TRUE(encode_negotiate(m, 1, SecureChannel::none, host_hashes, host_groups));
  const auto narrow = decode_negotiate(m);
  ASSERT_TRUE(narrow);
  const HashId only_sha512[] = {HashId::sha512};
  auto no_hash = select_hash(*narrow, only_sha512);
  ASSERT_FALSE(no_hash);
  EXPECT_EQ(no_hash.error().explanation, FailureExplanation::hash_unusable);
  const DhGroupId only_ffdhe[] = {DhGroupId::ffdhe2048, DhGroupId::ffdhe8192};
  auto no_group = select_dh_group(*narrow, only_ffdhe);
  ASSERT_FALSE(no_group);
  EXPECT_EQ(no_group.error().explanation, FailureExplanation::dhgroup_unusable);
  // An empty host list offers nothing.
  ASSERT_TRUE(encode_negotiate(m, 1, SecureChannel::none, {}, {}));
  EXPECT_FALSE(select_hash(*decode_negotiate(m), prefer_sha512));
}

// ---------------------------------------------------------------------------------------------------------
// DH-HMAC-CHAP_Challenge
// ---------------------------------------------------------------------------------------------------------

TEST(AuthChallenge, GoldenBytesNullGroup) {
  const auto c1 = pattern(32, 0xA0);
  std::vector<uint8_t> out(4096, 0xEE);
  auto n = encode_challenge(out, 0x0102, HashId::sha256, DhGroupId::null, 0xDEADBEEF, c1, {});
  ASSERT_TRUE(n);
  ASSERT_EQ(*n, 16u + 32u);
  const std::vector<uint8_t> head = {0x01, 0x01, 0, 0, 0x02, 0x01, 32, 0, 0x01, 0x00, 0, 0, 0xEF, 0xBE, 0xAD, 0xDE};
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 16), head);
  EXPECT_EQ(std::vector<uint8_t>(out.begin() + 16, out.begin() + 48), c1);
}

TEST(AuthChallenge, RoundTripWithDhValue) {
  const auto c1 = pattern(64, 3);
  const auto dh = pattern(384, 9);
  std::vector<uint8_t> out(4096);
  auto n = encode_challenge(out, 77, HashId::sha512, DhGroupId::ffdhe3072, 5, c1, dh);
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, challenge_size(64, 384));
  EXPECT_EQ(out[10], 0x80);  // DHVLEN 384 = 0x180
  EXPECT_EQ(out[11], 0x01);
  auto c = decode_challenge(out);  // trailing bytes of the 4096-byte buffer are fine
  ASSERT_TRUE(c) << c.error().what;
  EXPECT_EQ(c->t_id, 77);
  EXPECT_EQ(c->hash, HashId::sha512);
  EXPECT_EQ(c->dh_group, DhGroupId::ffdhe3072);
  EXPECT_EQ(c->seqnum, 5u);
  EXPECT_EQ(std::vector<uint8_t>(c->challenge.begin(), c->challenge.end()), c1);
  EXPECT_EQ(std::vector<uint8_t>(c->dh_value.begin(), c->dh_value.end()), dh);
}

TEST(AuthChallenge, RefusesTruncatedAndInconsistent) {
  const auto c1 = pattern(48, 1);
  const auto dh = pattern(256, 2);
  std::vector<uint8_t> good(challenge_size(48, 256));
  ASSERT_TRUE(encode_challenge(good, 1, HashId::sha384, DhGroupId::ffdhe2048, 1, c1, dh));
  expect_every_prefix_refused(good, [](auto s) { return decode_challenge(s); });

  auto expect = [&](std::vector<uint8_t> m, FailureExplanation why, uint32_t offset) {
    auto r = decode_challenge(m);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().explanation, why) << r.error().what;
    EXPECT_EQ(r.error().offset, offset) << r.error().what;
  };
  auto m = good;
  m[8] = 4;  // unknown HashID
  expect(m, FailureExplanation::hash_unusable, 8);
  m = good;
  m[6] = 32;  // HL not SHA-384's
  expect(m, FailureExplanation::hash_unusable, 6);
  m = good;
  m[9] = 6;  // unknown DH group
  expect(m, FailureExplanation::dhgroup_unusable, 9);
  m = good;
  m[9] = 0;  // null group with a DH value
  expect(m, FailureExplanation::incorrect_payload, 10);
  m = good;
  m[10] = 0x80;  // DHVLEN 0x0180 = 384: a group size, but not ffdhe2048's 256
  m[11] = 0x01;
  expect(m, FailureExplanation::incorrect_payload, 10);
  m = good;
  m[0] = 0;  // common type
  expect(m, FailureExplanation::incorrect_message, 0);
  m = good;
  m[1] = 2;  // a Reply id
  expect(m, FailureExplanation::incorrect_message, 1);
}

TEST(AuthChallenge, EncoderRefusesMismatchedSizes) {
  std::vector<uint8_t> out(4096);
  EXPECT_FALSE(encode_challenge(out, 0, HashId::sha256, DhGroupId::null, 1, pattern(31, 0), {}));
  EXPECT_FALSE(encode_challenge(out, 0, HashId::sha256, DhGroupId::ffdhe2048, 1, pattern(32, 0), pattern(255, 0)));
  EXPECT_FALSE(encode_challenge(out, 0, HashId::sha256, DhGroupId::null, 1, pattern(32, 0), pattern(256, 0)));
  std::vector<uint8_t> small(47);
  EXPECT_FALSE(encode_challenge(small, 0, HashId::sha256, DhGroupId::null, 1, pattern(32, 0), {}));
}

// ---------------------------------------------------------------------------------------------------------
// DH-HMAC-CHAP_Reply
// ---------------------------------------------------------------------------------------------------------

TEST(AuthReply, GoldenBytesAndRoundTrip) {
  const auto r1 = pattern(32, 0x10);
  const auto c2 = pattern(32, 0x50);
  const auto dh = pattern(256, 0x90);
  std::vector<uint8_t> out(4096, 0xEE);
  auto n = encode_reply(out, 0x0304, r1, true, 0x11223344, c2, dh);
  ASSERT_TRUE(n);
  ASSERT_EQ(*n, reply_size(32, 256));  // 16 + 2 * 32 + 256, as the kernel host sends
  const std::vector<uint8_t> head = {0x01, 0x02, 0, 0, 0x04, 0x03, 32, 0, 1, 0, 0x00, 0x01, 0x44, 0x33, 0x22, 0x11};
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 16), head);
  auto r = decode_reply(std::span<const uint8_t>(out).first(*n));
  ASSERT_TRUE(r) << r.error().what;
  EXPECT_EQ(r->t_id, 0x0304);
  EXPECT_EQ(r->hl, 32);
  EXPECT_TRUE(r->cvalid);
  EXPECT_EQ(r->seqnum, 0x11223344u);
  EXPECT_EQ(std::vector<uint8_t>(r->response.begin(), r->response.end()), r1);
  EXPECT_EQ(std::vector<uint8_t>(r->challenge.begin(), r->challenge.end()), c2);
  EXPECT_EQ(std::vector<uint8_t>(r->dh_value.begin(), r->dh_value.end()), dh);
}

TEST(AuthReply, WithoutControllerChallengeTheFieldIsZeros) {
  const auto r1 = pattern(48, 1);
  std::vector<uint8_t> out(4096, 0xEE);
  auto n = encode_reply(out, 1, r1, false, 0, {}, {});
  ASSERT_TRUE(n);
  ASSERT_EQ(*n, 16u + 96u);
  EXPECT_EQ(out[8], 0);  // CVALID
  for (std::size_t i = 16 + 48; i < 16 + 96; ++i) EXPECT_EQ(out[i], 0) << i;
  auto r = decode_reply(std::span<const uint8_t>(out).first(*n));
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->cvalid);
  EXPECT_TRUE(r->dh_value.empty());
  // cvalid with no C2 (or C2 without cvalid) is refused by the encoder.
  EXPECT_FALSE(encode_reply(out, 1, r1, true, 0, {}, {}));
  EXPECT_FALSE(encode_reply(out, 1, r1, false, 0, r1, {}));
}

TEST(AuthReply, RefusesTruncatedAndInconsistent) {
  std::vector<uint8_t> good(reply_size(64, 512));
  ASSERT_TRUE(encode_reply(good, 2, pattern(64, 0), true, 9, pattern(64, 1), pattern(512, 2)));
  expect_every_prefix_refused(good, [](auto s) { return decode_reply(s); });

  auto expect = [&](std::vector<uint8_t> m, FailureExplanation why, uint32_t offset) {
    auto r = decode_reply(m);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().explanation, why) << r.error().what;
    EXPECT_EQ(r.error().offset, offset) << r.error().what;
  };
  auto m = good;
  m[6] = 33;  // HL
  expect(m, FailureExplanation::hash_unusable, 6);
  m = good;
  m[6] = 0;
  expect(m, FailureExplanation::hash_unusable, 6);
  m = good;
  m[8] = 2;  // CVALID
  expect(m, FailureExplanation::incorrect_payload, 8);
  m = good;
  m[10] = 0x01;  // DHVLEN 0x0201: not a group size
  expect(m, FailureExplanation::incorrect_payload, 10);
  m = good;
  m[10] = 0x00;  // DHVLEN 0x0300 = 768 (ffdhe6144): runs past the 656-byte message
  m[11] = 0x03;
  expect(m, FailureExplanation::incorrect_payload, static_cast<uint32_t>(good.size()));
  m = good;
  m[0] = 0;
  expect(m, FailureExplanation::incorrect_message, 0);
}

// ---------------------------------------------------------------------------------------------------------
// Success1 / Success2 / Failure
// ---------------------------------------------------------------------------------------------------------

TEST(AuthSuccess1, RoundTripWithAndWithoutResponse) {
  const auto r2 = pattern(48, 7);
  std::vector<uint8_t> out(4096, 0xEE);
  auto n = encode_success1(out, 5, 48, r2);
  ASSERT_TRUE(n);
  ASSERT_EQ(*n, 16u + 48u);
  const std::vector<uint8_t> head = {0x01, 0x03, 0, 0, 5, 0, 48, 0, 1, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 16), head);
  auto s = decode_success1(std::span<const uint8_t>(out).first(*n));
  ASSERT_TRUE(s) << s.error().what;
  EXPECT_TRUE(s->rvalid);
  EXPECT_EQ(std::vector<uint8_t>(s->response.begin(), s->response.end()), r2);

  n = encode_success1(out, 5, 48, {});
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 16u + 48u);  // the kernel's nvmet sends the HL bytes anyway
  EXPECT_EQ(out[8], 0);
  for (std::size_t i = 16; i < 64; ++i) EXPECT_EQ(out[i], 0) << i;
  s = decode_success1(std::span<const uint8_t>(out).first(16));  // without RVALID the 16 bytes suffice
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->rvalid);
  EXPECT_TRUE(s->response.empty());
}

TEST(AuthSuccess1, RefusesTruncatedAndInconsistent) {
  std::vector<uint8_t> good(success1_size(32));
  ASSERT_TRUE(encode_success1(good, 1, 32, pattern(32, 0)));
  expect_every_prefix_refused(good, [](auto s) { return decode_success1(s); });
  auto m = good;
  m[6] = 31;
  auto r = decode_success1(m);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().explanation, FailureExplanation::hash_unusable);
  m = good;
  m[8] = 3;
  r = decode_success1(m);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().explanation, FailureExplanation::incorrect_payload);
  std::vector<uint8_t> out(100);
  EXPECT_FALSE(encode_success1(out, 1, 32, pattern(48, 0)));
  EXPECT_FALSE(encode_success1(out, 1, 40, {}));
}

TEST(AuthSuccess2, RoundTrip) {
  std::vector<uint8_t> out(16, 0xEE);
  auto n = encode_success2(out, 0xBEEF);
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 16u);
  const std::vector<uint8_t> want = {0x01, 0x04, 0, 0, 0xEF, 0xBE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(out, want);
  auto s = decode_success2(out);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->t_id, 0xBEEF);
  expect_every_prefix_refused(out, [](auto s2) { return decode_success2(s2); });
  EXPECT_FALSE(encode_success2(std::span<uint8_t>(out).first(15), 1));
}

TEST(AuthFailure, RoundTripBothDirections) {
  std::vector<uint8_t> out(8, 0xEE);
  auto n = encode_failure(out, MessageId::failure1, 0x0A0B, FailureExplanation::hash_unusable);
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 8u);
  const std::vector<uint8_t> want = {0x00, 0xF1, 0, 0, 0x0B, 0x0A, 0x01, 0x04};
  EXPECT_EQ(out, want);
  auto f = decode_failure(out);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->auth_id, MessageId::failure1);
  EXPECT_EQ(f->t_id, 0x0A0B);
  EXPECT_EQ(f->reason, kFailureReasonFailed);
  EXPECT_EQ(f->explanation, static_cast<uint8_t>(FailureExplanation::hash_unusable));
  expect_every_prefix_refused(out, [](auto s) { return decode_failure(s); });

  ASSERT_TRUE(encode_failure(out, MessageId::failure2, 1, FailureExplanation::failed));
  EXPECT_EQ(out[1], 0xF0);
  // Older kernels sent Failure2 with AUTH_TYPE 01h: still understood.
  out[0] = 0x01;
  f = decode_failure(out);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->auth_id, MessageId::failure2);
  out[0] = 0x02;
  auto bad = decode_failure(out);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().explanation, FailureExplanation::incorrect_message);
  out[0] = 0x00;
  out[1] = 0x03;  // Success1 is not a failure
  EXPECT_FALSE(decode_failure(out));
  EXPECT_FALSE(encode_failure(out, MessageId::reply, 1, FailureExplanation::failed));
}

// Random bytes (and random valid-looking headers) never crash a decoder, and every span a decoder returns
// lies inside the input.
TEST(AuthDecoders, SurviveArbitraryBytes) {
  std::mt19937 rng(12);
  std::vector<uint8_t> buf(2048);
  auto inside = [&](std::span<const uint8_t> s, std::size_t n) {
    return s.empty() || (s.data() >= buf.data() && s.data() + s.size() <= buf.data() + n);
  };
  for (int iter = 0; iter < 20000; ++iter) {
    const std::size_t n = rng() % buf.size();
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    if (n >= 2 && iter % 2 == 0) {  // make the header plausible half the time
      buf[0] = static_cast<uint8_t>(rng() % 2);
      const uint8_t ids[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0xF0, 0xF1};
      buf[1] = ids[rng() % 7];
      if (n >= 8) buf[6] = static_cast<uint8_t>(32 + 16 * (rng() % 3));  // a plausible HL
    }
    const std::span<const uint8_t> in(buf.data(), n);
    (void)decode_header(in);
    (void)decode_negotiate(in);
    if (auto c = decode_challenge(in)) {
      ASSERT_TRUE(inside(c->challenge, n) && inside(c->dh_value, n));
    }
    if (auto r = decode_reply(in)) {
      ASSERT_TRUE(inside(r->response, n) && inside(r->challenge, n) && inside(r->dh_value, n));
    }
    if (auto s = decode_success1(in)) {
      ASSERT_TRUE(inside(s->response, n));
    }
    (void)decode_success2(in);
    (void)decode_failure(in);
  }
}

TEST(AuthHeader, PeeksTypeIdAndTransaction) {
  const std::vector<uint8_t> m = {0x01, 0x02, 0, 0, 0x34, 0x12};
  auto h = decode_header(m);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->auth_type, AuthType::dhchap);
  EXPECT_EQ(h->auth_id, MessageId::reply);
  EXPECT_EQ(h->t_id, 0x1234);
  expect_every_prefix_refused(m, [](auto s) { return decode_header(s); });
  auto bad = decode_header(std::vector<uint8_t>{0x05, 0, 0, 0, 0, 0});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().explanation, FailureExplanation::incorrect_message);
}

TEST(AuthConstants, KernelValues) {
  // include/linux/nvme.h
  EXPECT_EQ(kSecpNvme, 0xE9);
  EXPECT_EQ(static_cast<uint8_t>(MessageId::failure1), 0xF1);
  EXPECT_EQ(static_cast<uint8_t>(MessageId::failure2), 0xF0);
  EXPECT_EQ(static_cast<uint8_t>(FailureExplanation::incorrect_message), 0x07);
  EXPECT_EQ(hash_length(HashId::sha384), 48u);
  EXPECT_EQ(hash_length(static_cast<HashId>(0)), 0u);
  EXPECT_EQ(dh_value_length(DhGroupId::ffdhe8192), 1024u);
  EXPECT_EQ(dh_value_length(static_cast<DhGroupId>(6)), 0u);
  EXPECT_STREQ(to_string(FailureExplanation::dhgroup_unusable), "DH group not usable");
}

}  // namespace
}  // namespace rdmablk::protocol::auth
