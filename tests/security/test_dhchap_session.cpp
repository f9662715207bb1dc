// DH-HMAC-CHAP transaction state machines (security/dhchap_session.h): the host and controller sessions run
// against each other in every hash x DH group, uni- and bidirectional; wrong secrets; every host message
// truncated, reordered, replayed or corrupted ends the transaction with the spec's Failure explanation
// (the ones nvmet answers with in fabrics-cmd-auth.c) and never crashes.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "protocol/auth.h"
#include "security/dhchap.h"
#include "security/dhchap_key.h"
#include "security/dhchap_session.h"

namespace rdmablk::security::dhchap {
namespace {

namespace auth = protocol::auth;

constexpr std::string_view kHostNqn = "nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100";
constexpr std::string_view kSubNqn = "nqn.2014-08.io.rdmablk:vol1";

struct Keys {
  DhchapKey host;
  DhchapKey ctrl;
};

Keys make_keys() {
  auto h = DhchapKey::generate(32, KeyTransform::sha256);
  auto c = DhchapKey::generate(48, KeyTransform::sha384);
  EXPECT_TRUE(h && c);
  return Keys{std::move(*h), std::move(*c)};
}

HostAuthSession make_host(const DhchapKey* host_key, const DhchapKey* ctrl_key, uint16_t t_id = 0,
                          std::vector<HashId> hashes = {std::begin(kAllHashes), std::end(kAllHashes)},
                          std::vector<DhGroupId> groups = {std::begin(kAllDhGroups), std::end(kAllDhGroups)}) {
  HostAuthParams p;
  p.host_key = host_key;
  p.ctrl_key = ctrl_key;
  p.host_nqn = std::string(kHostNqn);
  p.subsys_nqn = std::string(kSubNqn);
  p.hashes = std::move(hashes);
  p.dh_groups = std::move(groups);
  p.t_id = t_id;
  auto s = HostAuthSession::create(p);
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return std::move(*s);
}

ControllerAuthSession make_ctrl(const DhchapKey* host_key, const DhchapKey* ctrl_key,
                                std::vector<HashId> hashes = {std::begin(kAllHashes), std::end(kAllHashes)},
                                std::vector<DhGroupId> groups = {std::begin(kAllDhGroups), std::end(kAllDhGroups)}) {
  ControllerAuthParams p;
  p.host_key = host_key;
  p.ctrl_key = ctrl_key;
  p.subsys_nqn = std::string(kSubNqn);
  p.host_nqn = std::string(kHostNqn);
  p.hashes = std::move(hashes);
  p.dh_groups = std::move(groups);
  auto s = ControllerAuthSession::create(p);
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return std::move(*s);
}

// Lets a test change the index-th message the host sends (0 Negotiate, 1 Reply, 2 Success2/Failure2).
using Mutator = std::function<void(int index, std::vector<uint8_t>& message)>;

struct Trace {
  std::vector<std::vector<uint8_t>> host_messages;  // as sent (after the mutator)
  std::vector<std::vector<uint8_t>> ctrl_messages;  // as received by the host
};

Trace run(HostAuthSession& host, ControllerAuthSession& ctrl, const Mutator& mutate = {}) {
  Trace t;
  for (int i = 0; i < 16; ++i) {
    const HostStep st = host.step();
    if (st.kind == HostStep::Kind::send) {
      std::vector<uint8_t> msg(st.message.begin(), st.message.end());
      if (mutate) mutate(static_cast<int>(t.host_messages.size()), msg);
      ctrl.on_send(msg);
      t.host_messages.push_back(msg);
      host.sent();
    } else if (st.kind == HostStep::Kind::receive) {
      auto data = ctrl.next_receive(st.receive_length);
      t.ctrl_messages.push_back(data);
      host.received(data);
    } else {
      break;
    }
  }
  return t;
}

// The Failure1 the controller returns now: its explanation (checks it is a well-formed Failure1).
FailureExplanation failure1_explanation(ControllerAuthSession& ctrl, uint16_t t_id) {
  auto data = ctrl.next_receive(auth::kMaxTransferLength);
  auto f = auth::decode_failure(data);
  EXPECT_TRUE(f);
  if (!f) return FailureExplanation::failed;
  EXPECT_EQ(f->auth_id, MessageId::failure1);
  EXPECT_EQ(f->t_id, t_id);
  EXPECT_EQ(f->reason, auth::kFailureReasonFailed);
  return static_cast<FailureExplanation>(f->explanation);
}


// ---------------------------------------------------------------------------------------------------------
// Success
// ---------------------------------------------------------------------------------------------------------

TEST(DhchapSession, EveryHashAndGroupUnidirectionalAndBidirectional) {
  Keys keys = make_keys();
  for (HashId hash : kAllHashes) {
    for (DhGroupId group : kAllDhGroups) {
      for (bool bidi : {false, true}) {
        SCOPED_TRACE(std::string(digest_name(hash)) + " group " + std::to_string(static_cast<int>(group)) +
                     (bidi ? " bidirectional" : " unidirectional"));
        auto host = make_host(&keys.host, bidi ? &keys.ctrl : nullptr, 3);
        auto ctrl = make_ctrl(&keys.host, &keys.ctrl, {hash}, {group});
        Trace t = run(host, ctrl);
        EXPECT_EQ(host.step().kind, HostStep::Kind::succeeded) << host.step().failure.what;
        EXPECT_EQ(ctrl.state().status, AuthStatus::succeeded) << ctrl.state().failure.what;
        EXPECT_EQ(host.hash(), hash);
        EXPECT_EQ(host.dh_group(), group);
        EXPECT_EQ(ctrl.hash(), hash);
        EXPECT_EQ(ctrl.dh_group(), group);
        EXPECT_EQ(ctrl.bidirectional(), bidi);
        // Negotiate, Reply (+ Success2 when bidirectional); Challenge, Success1.
        ASSERT_EQ(t.host_messages.size(), bidi ? 3u : 2u);
        ASSERT_EQ(t.ctrl_messages.size(), 2u);
        auto ch = auth::decode_challenge(t.ctrl_messages[0]);
        ASSERT_TRUE(ch);
        EXPECT_EQ(ch->t_id, 3);
        EXPECT_EQ(ch->dh_value.size(), auth::dh_value_length(group));
        auto rep = auth::decode_reply(t.host_messages[1]);
        ASSERT_TRUE(rep);
        EXPECT_EQ(rep->cvalid, bidi);
        EXPECT_EQ(rep->dh_value.size(), auth::dh_value_length(group));
        auto s1 = auth::decode_success1(t.ctrl_messages[1]);
        ASSERT_TRUE(s1);
        EXPECT_EQ(s1->rvalid, bidi);
      }
    }
  }
}

TEST(DhchapSession, ControllerPreferenceDecidesAmongWhatTheHostOffers) {
  Keys keys = make_keys();
  {
    auto host = make_host(&keys.host, nullptr);
    auto ctrl = make_ctrl(&keys.host, nullptr, {HashId::sha512, HashId::sha256},
                          {DhGroupId::ffdhe3072, DhGroupId::null});
    run(host, ctrl);
    EXPECT_EQ(ctrl.state().status, AuthStatus::succeeded);
    EXPECT_EQ(ctrl.hash(), HashId::sha512);
    EXPECT_EQ(ctrl.dh_group(), DhGroupId::ffdhe3072);
  }
  {
    auto host = make_host(&keys.host, nullptr, 0, {HashId::sha256}, {DhGroupId::null});
    auto ctrl = make_ctrl(&keys.host, nullptr, {HashId::sha512, HashId::sha256},
                          {DhGroupId::ffdhe3072, DhGroupId::null});
    run(host, ctrl);
    EXPECT_EQ(ctrl.state().status, AuthStatus::succeeded);
    EXPECT_EQ(ctrl.hash(), HashId::sha256);
    EXPECT_EQ(ctrl.dh_group(), DhGroupId::null);
  }
}

TEST(DhchapSession, ReauthenticationStartsANewTransaction) {
  Keys keys = make_keys();
  auto ctrl = make_ctrl(&keys.host, &keys.ctrl, {HashId::sha256}, {DhGroupId::ffdhe2048});
  for (int round = 1; round <= 3; ++round) {
    auto host = make_host(&keys.host, round == 2 ? &keys.ctrl : nullptr, static_cast<uint16_t>(round));
    run(host, ctrl);
    EXPECT_EQ(host.step().kind, HostStep::Kind::succeeded);
    EXPECT_EQ(ctrl.state().status, AuthStatus::succeeded);
    EXPECT_EQ(ctrl.transactions(), static_cast<uint32_t>(round));
  }
  // A failed transaction can be followed by a good one (the kernel host retries on a new Negotiate).
  auto wrong = DhchapKey::generate(32, KeyTransform::none);
  ASSERT_TRUE(wrong);
  auto bad = make_host(&*wrong, nullptr, 9);
  run(bad, ctrl);
  EXPECT_EQ(ctrl.state().status, AuthStatus::failed);
  auto good = make_host(&keys.host, nullptr, 10);
  run(good, ctrl);
  EXPECT_EQ(ctrl.state().status, AuthStatus::succeeded);
}

// ---------------------------------------------------------------------------------------------------------
// Refusals between well-behaved sides
// ---------------------------------------------------------------------------------------------------------

TEST(DhchapSession, WrongHostSecretIsRefusedWithFailure1) {
  Keys keys = make_keys();
  auto wrong = DhchapKey::generate(32, KeyTransform::sha256);
  ASSERT_TRUE(wrong);
  for (DhGroupId group : {DhGroupId::null, DhGroupId::ffdhe2048}) {
    auto host = make_host(&*wrong, nullptr, 1);
    auto ctrl = make_ctrl(&keys.host, nullptr, {HashId::sha256}, {group});
    Trace t = run(host, ctrl);
    const auto cs = ctrl.state();
    EXPECT_EQ(cs.status, AuthStatus::failed);
    EXPECT_EQ(cs.failure.explanation, FailureExplanation::failed);
    EXPECT_FALSE(cs.failure.by_peer);
    const HostStep hs = host.step();
    ASSERT_EQ(hs.kind, HostStep::Kind::failed);
    EXPECT_TRUE(hs.failure.by_peer);  // the controller said so with AUTH_Failure1
    EXPECT_EQ(hs.failure.explanation, FailureExplanation::failed);
    ASSERT_EQ(t.ctrl_messages.size(), 2u);
    auto f = auth::decode_failure(t.ctrl_messages[1]);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->auth_id, MessageId::failure1);
    EXPECT_EQ(f->t_id, 1);
    EXPECT_EQ(f->explanation, static_cast<uint8_t>(FailureExplanation::failed));
  }
}

TEST(DhchapSession, WrongControllerSecretMakesTheHostSendFailure2) {
  Keys keys = make_keys();
  auto other = DhchapKey::generate(48, KeyTransform::sha384);
  ASSERT_TRUE(other);
  auto host = make_host(&keys.host, &keys.ctrl, 2);
  auto ctrl = make_ctrl(&keys.host, &*other, {HashId::sha384}, {DhGroupId::ffdhe2048});
  Trace t = run(host, ctrl);
  const HostStep hs = host.step();
  ASSERT_EQ(hs.kind, HostStep::Kind::failed);
  EXPECT_FALSE(hs.failure.by_peer);
  EXPECT_EQ(hs.failure.explanation, FailureExplanation::failed);
  ASSERT_EQ(t.host_messages.size(), 3u);
  auto f = auth::decode_failure(t.host_messages[2]);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->auth_id, MessageId::failure2);
  EXPECT_EQ(f->t_id, 2);
  EXPECT_EQ(f->explanation, static_cast<uint8_t>(FailureExplanation::failed));
  const auto cs = ctrl.state();
  EXPECT_EQ(cs.status, AuthStatus::failed);
  EXPECT_TRUE(cs.failure.by_peer);
  EXPECT_EQ(cs.failure.explanation, FailureExplanation::failed);
}

TEST(DhchapSession, HostWithoutASecretConfiguredOnTheControllerIsRefused) {
  Keys keys = make_keys();
  auto host = make_host(&keys.host, nullptr, 1);
  auto ctrl = make_ctrl(nullptr, nullptr);
  run(host, ctrl);
  EXPECT_EQ(ctrl.state().status, AuthStatus::failed);
  EXPECT_EQ(ctrl.state().failure.explanation, FailureExplanation::failed);
  EXPECT_EQ(host.step().kind, HostStep::Kind::failed);
  // And a host session cannot be made without a secret at all.
  HostAuthParams p;
  p.host_nqn = std::string(kHostNqn);
  p.subsys_nqn = std::string(kSubNqn);
  EXPECT_FALSE(HostAuthSession::create(p));
}

TEST(DhchapSession, BidirectionalRequestWithoutControllerSecretIsRefused) {
  Keys keys = make_keys();
  auto host = make_host(&keys.host, &keys.ctrl, 1);
  auto ctrl = make_ctrl(&keys.host, nullptr);
  run(host, ctrl);
  EXPECT_EQ(ctrl.state().status, AuthStatus::failed);
  EXPECT_EQ(host.step().kind, HostStep::Kind::failed);
  EXPECT_TRUE(host.step().failure.by_peer);
}

TEST(DhchapSession, NoCommonHashOrGroupOrConcatenation) {
  Keys keys = make_keys();
  {
    auto host = make_host(&keys.host, nullptr, 4, {HashId::sha256}, {DhGroupId::null});
    auto ctrl = make_ctrl(&keys.host, nullptr, {HashId::sha512});
    run(host, ctrl);
    EXPECT_EQ(ctrl.state().failure.explanation, FailureExplanation::hash_unusable);
    EXPECT_EQ(host.step().failure.explanation, FailureExplanation::hash_unusable);
    EXPECT_TRUE(host.step().failure.by_peer);
  }
  {
    auto host = make_host(&keys.host, nullptr, 4, {HashId::sha256}, {DhGroupId::null});
    auto ctrl = make_ctrl(&keys.host, nullptr, {HashId::sha256}, {DhGroupId::ffdhe4096});
    run(host, ctrl);
    EXPECT_EQ(ctrl.state().failure.explanation, FailureExplanation::dhgroup_unusable);
    EXPECT_EQ(host.step().failure.explanation, FailureExplanation::dhgroup_unusable);
  }
  {
    auto ctrl = make_ctrl(&keys.host, nullptr);
    std::vector<uint8_t> neg(auth::kMaxTransferLength);
    auto n = auth::encode_negotiate(neg, 6, auth::SecureChannel::new_tls_psk, kAllHashes, kAllDhGroups);
    ASSERT_TRUE(n);
    neg.resize(*n);
    ctrl.on_send(neg);
    EXPECT_EQ(ctrl.state().status, AuthStatus::failed);
    EXPECT_EQ(failure1_explanation(ctrl, 6), FailureExplanation::concat_mismatch);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Malformed, reordered and replayed messages at the controller
// ---------------------------------------------------------------------------------------------------------

TEST(DhchapSession, EveryTruncatedHostMessageFailsWithIncorrectPayload) {
  Keys keys = make_keys();
  for (int index = 0; index < 3; ++index) {
    // The message's full length, from a good run.
    auto h0 = make_host(&keys.host, &keys.ctrl, 5);
    auto c0 = make_ctrl(&keys.host, &keys.ctrl, {HashId::sha256}, {DhGroupId::ffdhe2048});
    const Trace good = run(h0, c0);
    ASSERT_EQ(good.host_messages.size(), 3u);
    const std::size_t full = good.host_messages[static_cast<std::size_t>(index)].size();
    for (std::size_t len = 0; len < full; ++len) {
      SCOPED_TRACE("message " + std::to_string(index) + " cut to " + std::to_string(len));
      auto host = make_host(&keys.host, &keys.ctrl, 5);
      auto ctrl = make_ctrl(&keys.host, &keys.ctrl, {HashId::sha256}, {DhGroupId::ffdhe2048});
      run(host, ctrl, [&](int i, std::vector<uint8_t>& m) {
        if (i == index) m.resize(len);
      });
      const auto cs = ctrl.state();
      ASSERT_EQ(cs.status, AuthStatus::failed);
      // The header cut short or a field past the data: incorrect payload (a cut Negotiate with AUTH_TYPE
      // but no AUTH_ID still reads as a 6-byte-short header).
      EXPECT_EQ(cs.failure.explanation, FailureExplanation::incorrect_payload) << cs.failure.what;
      // T_ID of a Negotiate cut inside its header is unknown: the Failure1 carries the last one seen (0).
      const uint16_t t_id = (index == 0 && len < sizeof(auth::MessageHeader)) ? 0 : 5;
      EXPECT_EQ(failure1_explanation(ctrl, t_id), FailureExplanation::incorrect_payload);
      if (index < 2) {
        EXPECT_EQ(host.step().kind, HostStep::Kind::failed);
        EXPECT_TRUE(host.step().failure.by_peer);
      }
    }
  }
}

TEST(DhchapSession, ReplyBeforeTheChallengeWasReadIsRefused) {
  Keys keys = make_keys();
  auto h0 = make_host(&keys.host, nullptr, 1);
  auto c0 = make_ctrl(&keys.host, nullptr, {HashId::sha256}, {DhGroupId::null});
  const Trace good = run(h0, c0);
  ASSERT_EQ(good.host_messages.size(), 2u);

  auto ctrl = make_ctrl(&keys.host, nullptr, {HashId::sha256}, {DhGroupId::null});
  ctrl.on_send(good.host_messages[0]);
  EXPECT_EQ(ctrl.state().status, AuthStatus::in_progress);
  ctrl.on_send(good.host_messages[1]);  // the Challenge was never read
  EXPECT_EQ(ctrl.state().status, AuthStatus::failed);
  EXPECT_EQ(ctrl.state().failure.explanation, FailureExplanation::incorrect_message);
  EXPECT_EQ(failure1_explanation(ctrl, 1), FailureExplanation::incorrect_message);
  // It stays failed, and repeats the Failure1.
  EXPECT_EQ(failure1_explanation(ctrl, 1), FailureExplanation::incorrect_message);
}

TEST(DhchapSession, OutOfOrderMessagesAndReceives) {
  Keys keys = make_keys();
  std::vector<uint8_t> success2(sizeof(auth::Success2Message));
  ASSERT_TRUE(auth::encode_success2(success2, 1));
  {  // a Receive before any Negotiate
    auto ctrl = make_ctrl(&keys.host, nullptr);
    EXPECT_EQ(failure1_explanation(ctrl, 0), FailureExplanation::incorrect_message);
    EXPECT_EQ(ctrl.state().status, AuthStatus::failed);
  }
  {  // Success2 before the Reply
    auto host = make_host(&keys.host, &keys.ctrl, 1);
    auto ctrl = make_ctrl(&keys.host, &keys.ctrl);
    ctrl.on_send(host.step().message);
    host.sent();
    host.received(ctrl.next_receive(host.step().receive_length));
    ctrl.on_send(success2);
    EXPECT_EQ(ctrl.state().failure.explanation, FailureExplanation::incorrect_message);
  }
  {  // two Receives in a row: the second has no message due
    auto host = make_host(&keys.host, nullptr, 1);
    auto ctrl = make_ctrl(&keys.host, nullptr);
    ctrl.on_send(host.step().message);
    EXPECT_TRUE(auth::decode_challenge(ctrl.next_receive(4096)));
    EXPECT_EQ(failure1_explanation(ctrl, 1), FailureExplanation::incorrect_message);
  }
  {  // Success2 after a unidirectional success: out of order, authentication revoked
    auto host = make_host(&keys.host, nullptr, 1);
    auto ctrl = make_ctrl(&keys.host, nullptr);
    run(host, ctrl);
    ASSERT_EQ(ctrl.state().status, AuthStatus::succeeded);
    ctrl.on_send(success2);
    EXPECT_EQ(ctrl.state().status, AuthStatus::failed);
    EXPECT_EQ(ctrl.state().failure.explanation, FailureExplanation::incorrect_message);
  }
  {  // a Challenge (controller-to-host message) sent to the controller
    auto ctrl = make_ctrl(&keys.host, nullptr);
    auto host = make_host(&keys.host, nullptr, 1);
    ctrl.on_send(host.step().message);
    auto ch = ctrl.next_receive(4096);
    ctrl.on_send(ch);
    EXPECT_EQ(ctrl.state().failure.explanation, FailureExplanation::incorrect_message);
  }
  {  // an unknown AUTH_TYPE
    auto ctrl = make_ctrl(&keys.host, nullptr);
    const std::vector<uint8_t> junk = {0x07, 0x00, 0, 0, 1, 0, 0, 0};
    ctrl.on_send(junk);
    EXPECT_EQ(ctrl.state().failure.explanation, FailureExplanation::incorrect_message);
  }
}

TEST(DhchapSession, ReplayedReplyInTheSameTransactionIsRefused) {
  Keys keys = make_keys();
  auto host = make_host(&keys.host, nullptr, 1);
  auto ctrl = make_ctrl(&keys.host, nullptr);
  Trace t = run(host, ctrl, [&](int i, std::vector<uint8_t>& m) {
    if (i == 1) {
      ctrl.on_send(m);  // the Reply arrives twice: the first one is checked, the second is out of order
    }
  });
  EXPECT_EQ(ctrl.state().status, AuthStatus::failed);
  EXPECT_EQ(ctrl.state().failure.explanation, FailureExplanation::incorrect_message);
}

TEST(DhchapSession, ReplayedTransactionIsRefused) {
  // A recorded good transaction replayed to a new controller session: its C1 differs, so R1 does not
  // match (null group and DH group alike).
  Keys keys = make_keys();
  for (DhGroupId group : {DhGroupId::null, DhGroupId::ffdhe2048}) {
    auto h0 = make_host(&keys.host, nullptr, 1);
    auto c0 = make_ctrl(&keys.host, nullptr, {HashId::sha256}, {group});
    const Trace rec = run(h0, c0);
    ASSERT_EQ(c0.state().status, AuthStatus::succeeded);
    auto ctrl = make_ctrl(&keys.host, nullptr, {HashId::sha256}, {group});
    ctrl.on_send(rec.host_messages[0]);
    (void)ctrl.next_receive(4096);
    ctrl.on_send(rec.host_messages[1]);
    EXPECT_EQ(ctrl.state().status, AuthStatus::failed);
    EXPECT_EQ(ctrl.state().failure.explanation, FailureExplanation::failed);
    // And on the same session after a re-Negotiate.
    c0.on_send(rec.host_messages[0]);
    (void)c0.next_receive(4096);
    c0.on_send(rec.host_messages[1]);
    EXPECT_EQ(c0.state().status, AuthStatus::failed);
  }
}

TEST(DhchapSession, ReplyFieldsMustMatchTheChoice) {
  Keys keys = make_keys();
  struct Case {
    const char* name;
    uint16_t t_id;
    std::size_t hl;
    std::size_t dhvlen;
    int dh_fill;  // -1: all 0xFF (above p), else the value of the last byte with zeros before it
  };
  const Case cases[] = {
      {"wrong T_ID", 99, 32, 256, 5},
      {"HL of SHA-512 with SHA-256 chosen", 1, 64, 256, 5},
      {"no DH value with ffdhe2048 chosen", 1, 32, 0, 5},
      {"ffdhe3072-sized DH value", 1, 32, 384, 5},
      {"DH value 1", 1, 32, 256, 1},
      {"DH value 0", 1, 32, 256, 0},
      {"DH value above p", 1, 32, 256, -1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto host = make_host(&keys.host, nullptr, 1);
    auto ctrl = make_ctrl(&keys.host, nullptr, {HashId::sha256}, {DhGroupId::ffdhe2048});
    ctrl.on_send(host.step().message);
    ASSERT_TRUE(auth::decode_challenge(ctrl.next_receive(4096)));
    std::vector<uint8_t> response(c.hl, 0x11);
    std::vector<uint8_t> dh(c.dhvlen, c.dh_fill < 0 ? 0xFF : 0x00);
    if (c.dh_fill >= 0 && !dh.empty()) dh.back() = static_cast<uint8_t>(c.dh_fill);
    std::vector<uint8_t> reply(auth::kMaxTransferLength);
    auto n = auth::encode_reply(reply, c.t_id, response, false, 0, {}, dh);
    ASSERT_TRUE(n);
    reply.resize(*n);
    ctrl.on_send(reply);
    EXPECT_EQ(ctrl.state().status, AuthStatus::failed);
    EXPECT_EQ(ctrl.state().failure.explanation, FailureExplanation::incorrect_payload) << ctrl.state().failure.what;
    EXPECT_EQ(failure1_explanation(ctrl, 1), FailureExplanation::incorrect_payload);
  }
}

TEST(DhchapSession, HostFailure2EndsTheTransaction) {
  Keys keys = make_keys();
  auto host = make_host(&keys.host, nullptr, 8);
  auto ctrl = make_ctrl(&keys.host, nullptr);
  ctrl.on_send(host.step().message);
  (void)ctrl.next_receive(4096);
  std::vector<uint8_t> f2(sizeof(auth::FailureMessage));
  ASSERT_TRUE(auth::encode_failure(f2, MessageId::failure2, 8, FailureExplanation::dhgroup_unusable));
  ctrl.on_send(f2);
  EXPECT_EQ(ctrl.state().status, AuthStatus::failed);
  EXPECT_TRUE(ctrl.state().failure.by_peer);
  EXPECT_EQ(ctrl.state().failure.explanation, FailureExplanation::dhgroup_unusable);
}

TEST(DhchapSession, AllocationLengthTooSmallForTheChallenge) {
  Keys keys = make_keys();
  auto host = make_host(&keys.host, nullptr, 1);
  auto ctrl = make_ctrl(&keys.host, nullptr, {HashId::sha256}, {DhGroupId::ffdhe2048});
  ctrl.on_send(host.step().message);
  auto out = ctrl.next_receive(100);  // the Challenge is 16 + 32 + 256 bytes
  ASSERT_EQ(out.size(), sizeof(auth::FailureMessage));
  auto f = auth::decode_failure(out);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->explanation, static_cast<uint8_t>(FailureExplanation::incorrect_payload));
  EXPECT_LE(ctrl.next_receive(4).size(), 4u);  // never more than AL
}

TEST(DhchapSession, RandomMessagesNeverCrashEitherSide) {
  Keys keys = make_keys();
  std::mt19937 rng(1234);
  for (int round = 0; round < 2000; ++round) {
    auto host = make_host(&keys.host, (round & 1) ? &keys.ctrl : nullptr, 1);
    auto ctrl = make_ctrl(&keys.host, &keys.ctrl, {HashId::sha256}, {DhGroupId::null});
    const int victim = static_cast<int>(rng() % 3);
    const bool keep_header = rng() % 2 == 0;
    run(host, ctrl, [&](int i, std::vector<uint8_t>& m) {
      if (i != victim) return;
      const std::size_t from = keep_header ? std::min<std::size_t>(m.size(), 6) : 0;
      for (std::size_t k = from; k < m.size(); ++k) {
        if (rng() % 8 == 0) m[k] = static_cast<uint8_t>(rng());
      }
      if (rng() % 4 == 0) m.resize(rng() % (m.size() + 8));
    });
    // Whatever happened, both sides agree the result is not a silent success on one side only.
    if (ctrl.state().status == AuthStatus::succeeded) {
      EXPECT_EQ(host.step().kind, HostStep::Kind::succeeded);
    }
    // Random bytes as controller messages for the host, too.
    auto h2 = make_host(&keys.host, nullptr, 1);
    h2.sent();
    std::vector<uint8_t> junk(rng() % 400);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    if (junk.size() > 1 && rng() % 2 == 0) {
      junk[0] = 0x01;
      junk[1] = 0x01;
    }
    h2.received(junk);
    EXPECT_NE(h2.step().kind, HostStep::Kind::succeeded);
  }
}

// ---------------------------------------------------------------------------------------------------------
// The host against a misbehaving controller
// ---------------------------------------------------------------------------------------------------------

std::vector<uint8_t> challenge(uint16_t t_id, HashId hash, DhGroupId group, std::span<const uint8_t> dh) {
  std::vector<uint8_t> out(auth::kMaxTransferLength);
  std::vector<uint8_t> c(auth::hash_length(hash), 0x5A);
  auto n = auth::encode_challenge(out, t_id, hash, group, 42, c, dh);
  EXPECT_TRUE(n);
  out.resize(n ? *n : 0);
  return out;
}

TEST(DhchapSession, HostAnswersABadChallengeWithFailure2) {
  Keys keys = make_keys();
  struct Case {
    const char* name;
    std::vector<uint8_t> message;
    FailureExplanation expected;
  };
  std::vector<uint8_t> dh2048(256, 0);
  dh2048.back() = 1;  // out of range
  std::vector<Case> cases;
  cases.push_back({"hash not offered", challenge(1, HashId::sha512, DhGroupId::null, {}),
                   FailureExplanation::hash_unusable});
  cases.push_back({"DH group not offered", challenge(1, HashId::sha256, DhGroupId::ffdhe3072,
                                                     std::vector<uint8_t>(384, 7)),
                   FailureExplanation::dhgroup_unusable});
  cases.push_back({"wrong T_ID", challenge(2, HashId::sha256, DhGroupId::null, {}),
                   FailureExplanation::incorrect_payload});
  cases.push_back({"DH value out of range", challenge(1, HashId::sha256, DhGroupId::ffdhe2048, dh2048),
                   FailureExplanation::incorrect_payload});
  auto truncated = challenge(1, HashId::sha256, DhGroupId::null, {});
  truncated.resize(20);
  cases.push_back({"truncated", truncated, FailureExplanation::incorrect_payload});
  std::vector<uint8_t> s1(64);
  ASSERT_TRUE(auth::encode_success1(s1, 1, 32, {}));
  cases.push_back({"Success1 instead of the Challenge", s1, FailureExplanation::incorrect_message});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto host = make_host(&keys.host, nullptr, 1, {HashId::sha256, HashId::sha384},
                          {DhGroupId::null, DhGroupId::ffdhe2048});
    host.sent();
    host.received(c.message);
    HostStep st = host.step();
    ASSERT_EQ(st.kind, HostStep::Kind::send);
    auto f = auth::decode_failure(st.message);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->auth_id, MessageId::failure2);
    EXPECT_EQ(f->t_id, 1);
    EXPECT_EQ(f->explanation, static_cast<uint8_t>(c.expected));
    host.sent();
    st = host.step();
    ASSERT_EQ(st.kind, HostStep::Kind::failed);
    EXPECT_EQ(st.failure.explanation, c.expected);
    EXPECT_FALSE(st.failure.by_peer);
  }
}

TEST(DhchapSession, HostEndsOnFailure1WithTheControllersReason) {
  Keys keys = make_keys();
  auto host = make_host(&keys.host, nullptr, 3);
  host.sent();
  std::vector<uint8_t> f1(sizeof(auth::FailureMessage));
  ASSERT_TRUE(auth::encode_failure(f1, MessageId::failure1, 3, FailureExplanation::hash_unusable));
  host.received(f1);
  const HostStep st = host.step();
  ASSERT_EQ(st.kind, HostStep::Kind::failed);
  EXPECT_TRUE(st.failure.by_peer);
  EXPECT_EQ(st.failure.explanation, FailureExplanation::hash_unusable);
}

TEST(DhchapSession, HostRefusesSuccess1WithoutR2WhenBidirectional) {
  Keys keys = make_keys();
  auto host = make_host(&keys.host, &keys.ctrl, 1);
  auto ctrl = make_ctrl(&keys.host, &keys.ctrl, {HashId::sha256}, {DhGroupId::null});
  ctrl.on_send(host.step().message);
  host.sent();
  host.received(ctrl.next_receive(4096));
  ASSERT_EQ(host.step().kind, HostStep::Kind::send);
  host.sent();
  std::vector<uint8_t> s1(64);
  auto n = auth::encode_success1(s1, 1, 32, {});  // RVALID 0
  ASSERT_TRUE(n);
  s1.resize(*n);
  host.received(s1);
  HostStep st = host.step();
  ASSERT_EQ(st.kind, HostStep::Kind::send);
  auto f = auth::decode_failure(st.message);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->auth_id, MessageId::failure2);
  host.sent();
  EXPECT_EQ(host.step().kind, HostStep::Kind::failed);
}

TEST(DhchapSession, AbortEndsTheHostSession) {
  Keys keys = make_keys();
  auto host = make_host(&keys.host, nullptr, 1);
  host.abort("Authentication Send failed");
  EXPECT_EQ(host.step().kind, HostStep::Kind::failed);
  EXPECT_STREQ(host.step().failure.what, "Authentication Send failed");
}

}  // namespace
}  // namespace rdmablk::security::dhchap
