// Target core: DH-HMAC-CHAP in-band authentication over Authentication Send / Receive (target/commands/auth.cpp),
// driven by the host side state machine (security::dhchap::HostAuthSession) through the fake transport queue:
// the Connect response's AUTHREQ.ATR, Authentication Required for everything but fabrics commands until the
// queue authenticated, admin and I/O queues, uni- and bidirectional, wrong secrets, re-authentication, hosts
// required to authenticate, and the per-host failure limit.
#include <memory>

#include "protocol/auth.h"
#include "security/dhchap_key.h"
#include "security/dhchap_session.h"
#include "target/control/control_api.h"
#include "target/core_test_util.h"

namespace rdmablk::target::testing {
namespace {

namespace auth = protocol::auth;
using security::dhchap::DhchapKey;
using security::dhchap::FailureExplanation;
using security::dhchap::HostAuthParams;
using security::dhchap::HostAuthSession;
using security::dhchap::HostStep;
using security::dhchap::KeyTransform;

// nvmet's NVME_SC_AUTH_REQUIRED | NVME_STATUS_DNR: SCT 1h, SC 91h.
const p::Status kAuthRequired{p::StatusCodeType::command_specific, 0x91, true};
constexpr uint32_t kAtr = 1u << 17;  // Connect DW0 AUTHREQ.ATR (NVME_CONNECT_AUTHREQ_ATR)

std::shared_ptr<const DhchapKey> new_key(std::size_t len = 32, KeyTransform t = KeyTransform::sha256) {
  auto k = DhchapKey::generate(len, t);
  EXPECT_TRUE(k);
  return std::make_shared<const DhchapKey>(std::move(*k));
}

struct Keys {
  std::shared_ptr<const DhchapKey> host = new_key();
  std::shared_ptr<const DhchapKey> ctrl = new_key(48, KeyTransform::sha384);
};

// test_config() with kHost1's secret on sub2 (only kHost1 may connect there); `ctrl_key` adds the
// controller secret.
TargetConfig auth_config(const Keys& keys, bool bidirectional, bool require_authentication = false) {
  auto c = test_config();
  HostConfig hc;
  hc.nqn = kHost1;
  hc.dhchap_key.key = keys.host;
  if (bidirectional) hc.dhchap_ctrl_key.key = keys.ctrl;
  hc.dhchap_dhgroups = {auth::DhGroupId::ffdhe2048, auth::DhGroupId::null};
  c.subsystems[1].host_configs = {hc};
  c.subsystems[1].require_authentication = require_authentication;
  return c;
}

HostAuthSession host_session(const DhchapKey* host_key, const DhchapKey* ctrl_key, uint16_t t_id,
                             std::string_view subnqn = kSub2, std::string_view hostnqn = kHost1) {
  HostAuthParams params;
  params.host_key = host_key;
  params.ctrl_key = ctrl_key;
  params.host_nqn = std::string(hostnqn);
  params.subsys_nqn = std::string(subnqn);
  params.t_id = t_id;
  auto s = HostAuthSession::create(params);
  EXPECT_TRUE(s);
  return std::move(*s);
}

// Runs the host's transaction over the queue; returns its last step. Sends go in-capsule or fetched.
HostStep authenticate(CoreHarness& h, FakeTargetQueue& q, HostAuthSession& host, bool in_capsule = true,
                      std::vector<auth::MessageId>* sent_ids = nullptr) {
  for (int i = 0; i < 10; ++i) {
    const HostStep st = host.step();
    if (st.kind == HostStep::Kind::send) {
      std::vector<uint8_t> msg(st.message.begin(), st.message.end());
      if (sent_ids && msg.size() > 1) sent_ids->push_back(static_cast<auth::MessageId>(msg[1]));
      const auto size = static_cast<uint32_t>(msg.size());
      const auto sgl = in_capsule ? p::make_in_capsule_sgl(0, size) : CoreHarness::sgl_for(q, size);
      auto c = h.run(q, sqe_of(auth::make_authentication_send(h.next_cid(), size, sgl)), msg);
      if (!c.status().ok()) {
        host.abort("Authentication Send failed");
        continue;
      }
      host.sent();
    } else if (st.kind == HostStep::Kind::receive) {
      auto c = h.run(q, sqe_of(auth::make_authentication_receive(h.next_cid(), st.receive_length,
                                                                  CoreHarness::sgl_for(q, st.receive_length))));
      if (!c.status().ok()) {
        host.abort("Authentication Receive failed");
        continue;
      }
      EXPECT_EQ(c.data.size(), st.receive_length);
      host.received(c.data);
    } else {
      return st;
    }
  }
  return host.step();
}

Completed auth_send_raw(CoreHarness& h, FakeTargetQueue& q, std::vector<uint8_t> msg) {
  const auto size = static_cast<uint32_t>(msg.size());
  return h.run(q, sqe_of(auth::make_authentication_send(h.next_cid(), size, p::make_in_capsule_sgl(0, size))), msg);
}

Completed auth_receive_raw(CoreHarness& h, FakeTargetQueue& q, uint32_t al = 4096) {
  return h.run(q, sqe_of(auth::make_authentication_receive(h.next_cid(), al, CoreHarness::sgl_for(q, al))));
}

// Admin Connect of kHost1 to sub2 (no enable: that comes after authentication, as the kernel host does).
Completed connect_admin(CoreHarness& h, FakeTargetQueue& q, std::string_view hostnqn = kHost1,
                        std::string_view subnqn = kSub2) {
  return h.connect(q, 0, 31, subnqn, hostnqn);
}

TEST(CoreAuth, AtrIsSetOnlyForHostsWithASecret) {
  Keys keys;
  CoreHarness h(auth_config(keys, false));
  auto q = h.queue();
  auto c = connect_admin(h, *q);
  ASSERT_TRUE(c.status().ok()) << p::status_name(c.status());
  EXPECT_EQ(c.dw0() & kAtr, kAtr);
  EXPECT_EQ(c.dw0() & (1u << 18), 0u);  // ASCR: no secure channel
  EXPECT_NE(p::connect_result_cntlid(c.dw0()), 0);
  // The same host on sub1 has no secret there: no authentication.
  auto q2 = h.queue();
  auto c2 = connect_admin(h, *q2, kHost1, kSub1);
  ASSERT_TRUE(c2.status().ok());
  EXPECT_EQ(c2.dw0() & kAtr, 0u);
  ASSERT_TRUE(h.enable(*q2).status().ok());
  auto id = h.identify(*q2, p::Cns::controller, 0);
  EXPECT_TRUE(id.status().ok()) << p::status_name(id.status());
}

TEST(CoreAuth, CommandsBeforeAuthenticationAreRefusedFabricsAreNot) {
  Keys keys;
  CoreHarness h(auth_config(keys, false));
  auto q = h.queue();
  ASSERT_TRUE(connect_admin(h, *q).status().ok());
  EXPECT_EQ(h.identify(*q, p::Cns::controller, 0).status(), kAuthRequired);
  EXPECT_EQ(h.get_feature(*q, p::FeatureId::number_of_queues).status(), kAuthRequired);
  // Property Get / Set are fabrics commands: allowed (nvmet_parse_fabrics_admin_cmd before the check).
  EXPECT_TRUE(h.prop_get(*q, p::property::vs, false).status().ok());
  EXPECT_TRUE(h.enable(*q).status().ok());
  EXPECT_EQ(h.identify(*q, p::Cns::controller, 0).status(), kAuthRequired);

  auto host = host_session(keys.host.get(), nullptr, 0);
  const HostStep st = authenticate(h, *q, host);
  ASSERT_EQ(st.kind, HostStep::Kind::succeeded) << st.failure.what;
  EXPECT_TRUE(h.identify(*q, p::Cns::controller, 0).status().ok());
}

TEST(CoreAuth, UnidirectionalAndBidirectionalWithDataInCapsuleOrFetched) {
  Keys keys;
  for (bool bidi : {false, true}) {
    for (bool in_capsule : {true, false}) {
      SCOPED_TRACE(std::string(bidi ? "bidirectional" : "unidirectional") + (in_capsule ? " in-capsule" : " fetched"));
      CoreHarness h(auth_config(keys, bidi));
      auto q = h.queue();
      ASSERT_TRUE(connect_admin(h, *q).status().ok());
      auto host = host_session(keys.host.get(), bidi ? keys.ctrl.get() : nullptr, 0);
      std::vector<auth::MessageId> sent;
      const HostStep st = authenticate(h, *q, host, in_capsule, &sent);
      ASSERT_EQ(st.kind, HostStep::Kind::succeeded) << st.failure.what;
      EXPECT_EQ(host.dh_group(), auth::DhGroupId::ffdhe2048);  // the config's first choice
      EXPECT_EQ(sent.size(), bidi ? 3u : 2u);
      if (!in_capsule) {
        EXPECT_EQ(q->fetches, static_cast<int>(sent.size()));
      }
      EXPECT_TRUE(h.enable(*q).status().ok());
      EXPECT_TRUE(h.identify(*q, p::Cns::controller, 0).status().ok());
    }
  }
}

// limits.connections.connect_timeout_ms bounds Connect and authentication together: a host that connects
// and then never finishes DH-HMAC-CHAP loses the queue (it would hold a place under the connection limits
// and its buffers forever), one that authenticated in time keeps it.
TEST(CoreAuth, AQueueNotAuthenticatedWithinTheConnectTimeoutIsClosed) {
  Keys keys;
  auto config = auth_config(keys, false);
  config.limits.connections.connect_timeout_ms = 1000;
  CoreHarness h(config);
  auto stalled = h.queue();
  auto c = connect_admin(h, *stalled);
  ASSERT_TRUE(c.status().ok()) << p::status_name(c.status());
  ASSERT_EQ(c.dw0() & kAtr, kAtr);
  auto negotiated_only = h.queue();  // starts a transaction and stops after AUTH_Negotiate
  ASSERT_TRUE(connect_admin(h, *negotiated_only).status().ok());
  auto partial = host_session(keys.host.get(), nullptr, 7);
  const HostStep first = partial.step();
  ASSERT_EQ(first.kind, HostStep::Kind::send);
  ASSERT_TRUE(auth_send_raw(h, *negotiated_only, {first.message.begin(), first.message.end()}).status().ok());
  auto done = h.queue();
  ASSERT_TRUE(connect_admin(h, *done).status().ok());
  auto host = host_session(keys.host.get(), nullptr, 1);
  ASSERT_EQ(authenticate(h, *done, host).kind, HostStep::Kind::succeeded);

  h.reactor.advance(std::chrono::milliseconds(999));
  EXPECT_FALSE(stalled->closed);
  EXPECT_FALSE(negotiated_only->closed);
  h.reactor.advance(std::chrono::milliseconds(2));
  EXPECT_TRUE(stalled->closed);
  EXPECT_EQ(stalled->close_reason, "not authenticated in time");
  EXPECT_TRUE(negotiated_only->closed);
  EXPECT_EQ(negotiated_only->close_reason, "not authenticated in time");
  EXPECT_FALSE(done->closed);
  h.reactor.advance(std::chrono::milliseconds(60'000));
  EXPECT_FALSE(done->closed);
  EXPECT_TRUE(h.enable(*done).status().ok());
  EXPECT_TRUE(h.identify(*done, p::Cns::controller, 0).status().ok());
  // A host without a secret (sub1) is not bound by it once connected.
  auto plain = h.queue();
  ASSERT_TRUE(connect_admin(h, *plain, kHost1, kSub1).status().ok());
  h.reactor.advance(std::chrono::milliseconds(5'000));
  EXPECT_FALSE(plain->closed);
}

TEST(CoreAuth, WrongHostSecretGetsFailure1AndTheQueueStaysRefused) {
  Keys keys;
  CoreHarness h(auth_config(keys, false));
  auto q = h.queue();
  ASSERT_TRUE(connect_admin(h, *q).status().ok());
  auto wrong = new_key();
  auto host = host_session(wrong.get(), nullptr, 0);
  const HostStep st = authenticate(h, *q, host);
  ASSERT_EQ(st.kind, HostStep::Kind::failed);
  EXPECT_TRUE(st.failure.by_peer);
  EXPECT_EQ(st.failure.explanation, FailureExplanation::failed);
  EXPECT_EQ(h.identify(*q, p::Cns::controller, 0).status(), kAuthRequired);
  // Receiving again returns the Failure1 again.
  auto again = auth_receive_raw(h, *q);
  ASSERT_TRUE(again.status().ok());
  auto f = auth::decode_failure(again.data);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->auth_id, auth::MessageId::failure1);
}

TEST(CoreAuth, WrongControllerSecretMakesTheHostSendFailure2) {
  Keys keys;
  CoreHarness h(auth_config(keys, true));
  auto q = h.queue();
  ASSERT_TRUE(connect_admin(h, *q).status().ok());
  auto other = new_key(48, KeyTransform::sha384);
  auto host = host_session(keys.host.get(), other.get(), 0);
  std::vector<auth::MessageId> sent;
  const HostStep st = authenticate(h, *q, host, true, &sent);
  ASSERT_EQ(st.kind, HostStep::Kind::failed);
  EXPECT_FALSE(st.failure.by_peer);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[2], auth::MessageId::failure2);
  EXPECT_EQ(h.identify(*q, p::Cns::controller, 0).status(), kAuthRequired);
}

TEST(CoreAuth, EveryIoQueueAuthenticates) {
  Keys keys;
  CoreHarness h(auth_config(keys, true));
  auto admin = h.queue();
  auto c = connect_admin(h, *admin);
  ASSERT_TRUE(c.status().ok());
  auto host = host_session(keys.host.get(), keys.ctrl.get(), 0);
  ASSERT_EQ(authenticate(h, *admin, host).kind, HostStep::Kind::succeeded);
  ASSERT_TRUE(h.enable(*admin).status().ok());
  const uint16_t cntlid = p::connect_result_cntlid(c.dw0());

  for (uint16_t qid = 1; qid <= 2; ++qid) {
    auto io = h.queue();
    auto ic = h.connect(*io, qid, 127, kSub2, kHost1, cntlid);
    ASSERT_TRUE(ic.status().ok()) << p::status_name(ic.status());
    EXPECT_EQ(ic.dw0() & kAtr, kAtr);
    EXPECT_EQ(h.read(*io, 1, 0, 1, 512).status(), kAuthRequired);
    auto io_host = host_session(keys.host.get(), keys.ctrl.get(), qid);  // the kernel uses the qid as T_ID
    ASSERT_EQ(authenticate(h, *io, io_host, false).kind, HostStep::Kind::succeeded);
    EXPECT_TRUE(h.read(*io, 1, 0, 1, 512).status().ok());
  }
}

TEST(CoreAuth, ReauthenticationAndAFailedOneRevokesTheQueue) {
  Keys keys;
  CoreHarness h(auth_config(keys, false));
  auto q = h.queue();
  ASSERT_TRUE(connect_admin(h, *q).status().ok());
  ASSERT_TRUE(h.enable(*q).status().ok());
  for (int round = 0; round < 3; ++round) {
    auto host = host_session(keys.host.get(), nullptr, 0);
    ASSERT_EQ(authenticate(h, *q, host).kind, HostStep::Kind::succeeded) << "round " << round;
    EXPECT_TRUE(h.identify(*q, p::Cns::controller, 0).status().ok());
  }
  // A re-authentication in progress does not stop the queue (the kernel host keeps I/O going).
  auto host = host_session(keys.host.get(), nullptr, 0);
  const HostStep negotiate = host.step();
  ASSERT_TRUE(auth_send_raw(h, *q, {negotiate.message.begin(), negotiate.message.end()}).status().ok());
  auto id = h.identify(*q, p::Cns::controller, 0);
  EXPECT_TRUE(id.status().ok()) << p::status_name(id.status());
  // ... but a failed one ends it.
  auto wrong = new_key();
  auto bad = host_session(wrong.get(), nullptr, 0);
  ASSERT_EQ(authenticate(h, *q, bad).kind, HostStep::Kind::failed);
  EXPECT_EQ(h.identify(*q, p::Cns::controller, 0).status(), kAuthRequired);
}

TEST(CoreAuth, RequireAuthenticationRefusesHostsWithoutASecret) {
  Keys keys;
  auto config = auth_config(keys, false, /*require_authentication=*/true);
  config.subsystems[1].allow_any_host = true;  // any host may try; only kHost1 has a secret
  CoreHarness h(config);
  auto q = h.queue();
  auto c = connect_admin(h, *q, kHost2);
  EXPECT_EQ(c.status(), st::connect_invalid_host);
  EXPECT_FALSE(q->connected);
  auto q1 = h.queue();
  auto c1 = connect_admin(h, *q1, kHost1);
  ASSERT_TRUE(c1.status().ok());
  EXPECT_EQ(c1.dw0() & kAtr, kAtr);
}

TEST(CoreAuth, TooManyFailuresRefuseTheHostForAWhile) {
  Keys keys;
  auto now = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  CoreOptions options;
  options.auth_failures.max_failures = 3;
  options.auth_failures.window = std::chrono::seconds(60);
  options.auth_failures.block = std::chrono::seconds(300);
  options.auth_failures.now = [now] { return *now; };
  auto config = auth_config(keys, false);
  // kHost2 has a secret on sub2 too: it must not pay for kHost1's failures.
  HostConfig other;
  other.nqn = kHost2;
  other.dhchap_key.key = keys.host;
  config.subsystems[1].hosts = {kHost1, kHost2};
  config.subsystems[1].host_configs.push_back(other);
  CoreHarness h(config, options);

  auto wrong = new_key();
  auto q = h.queue();
  auto c = connect_admin(h, *q);
  ASSERT_TRUE(c.status().ok());
  const uint16_t cntlid = p::connect_result_cntlid(c.dw0());
  ASSERT_TRUE(h.enable(*q).status().ok());
  // Two failures, then the window passes: they no longer count.
  for (int i = 0; i < 2; ++i) {
    auto bad = host_session(wrong.get(), nullptr, 0);
    ASSERT_EQ(authenticate(h, *q, bad).kind, HostStep::Kind::failed);
  }
  *now += std::chrono::seconds(61);
  {
    auto q2 = h.queue();
    EXPECT_TRUE(connect_admin(h, *q2).status().ok());
  }
  // Three within the window: refused.
  for (int i = 0; i < 3; ++i) {
    auto bad = host_session(wrong.get(), nullptr, 0);
    ASSERT_EQ(authenticate(h, *q, bad).kind, HostStep::Kind::failed);
  }
  auto q3 = h.queue();
  EXPECT_EQ(connect_admin(h, *q3).status(), st::connect_invalid_host);
  auto io = h.queue();
  EXPECT_EQ(h.connect(*io, 1, 127, kSub2, kHost1, cntlid).status(), st::connect_invalid_host);
  // Another host is not affected.
  auto q4 = h.queue();
  EXPECT_TRUE(h.connect(*q4, 0, 31, kSub2, kHost2, p::kCntlidDynamic, 0, kHostId2).status().ok());
  // After the block: accepted again.
  *now += std::chrono::seconds(301);
  auto q5 = h.queue();
  EXPECT_TRUE(connect_admin(h, *q5).status().ok());
}

TEST(CoreAuth, BadCommandFieldsAndOrder) {
  Keys keys;
  CoreHarness h(auth_config(keys, false));
  // Before Connect: a sequence error like any command.
  {
    auto q = h.queue();
    EXPECT_EQ(auth_receive_raw(h, *q).status(), st::command_sequence_error);
  }
  auto q = h.queue();
  ASSERT_TRUE(connect_admin(h, *q).status().ok());
  auto host = host_session(keys.host.get(), nullptr, 0);
  std::vector<uint8_t> negotiate(host.step().message.begin(), host.step().message.end());
  const auto size = static_cast<uint32_t>(negotiate.size());
  {  // SECP other than E9h
    auto cmd = auth::make_authentication_send(h.next_cid(), size, p::make_in_capsule_sgl(0, size));
    cmd.secp = 0xEA;
    EXPECT_EQ(h.run(*q, sqe_of(cmd), negotiate).status(), st::invalid_field);
  }
  {  // SPSP0 other than 01h
    auto cmd = auth::make_authentication_receive(h.next_cid(), 4096, CoreHarness::sgl_for(*q, 4096));
    cmd.spsp0 = 0;
    EXPECT_EQ(h.run(*q, sqe_of(cmd)).status(), st::invalid_field);
  }
  {  // TL 0, and TL over 4096
    auto cmd = auth::make_authentication_send(h.next_cid(), 0, p::make_in_capsule_sgl(0, size));
    EXPECT_EQ(h.run(*q, sqe_of(cmd), negotiate).status(), st::invalid_field);
    std::vector<uint8_t> big(8192, 0);
    auto cmd2 = auth::make_authentication_send(h.next_cid(), 8192, p::make_in_capsule_sgl(0, 8192));
    EXPECT_EQ(h.run(*q, sqe_of(cmd2), big).status(), st::invalid_field);
  }
  {  // AL over 64 KiB
    auto cmd = auth::make_authentication_receive(h.next_cid(), 65537, CoreHarness::sgl_for(*q, 65537));
    EXPECT_EQ(h.run(*q, sqe_of(cmd)).status(), st::invalid_field);
  }
  {  // TL not the SGL's length
    auto cmd = auth::make_authentication_send(h.next_cid(), size - 1, p::make_in_capsule_sgl(0, size));
    EXPECT_EQ(h.run(*q, sqe_of(cmd), negotiate).status(), st::data_sgl_length_invalid);
  }
  // A Receive before any Negotiate: AUTH_Failure1 (incorrect message), and the queue stays refused.
  auto r = auth_receive_raw(h, *q);
  ASSERT_TRUE(r.status().ok());
  auto f = auth::decode_failure(r.data);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->explanation, static_cast<uint8_t>(FailureExplanation::incorrect_message));
  // Garbage and truncated messages complete the command successfully and fail the transaction (after a
  // Negotiate: a failed transaction keeps its first reason).
  EXPECT_TRUE(auth_send_raw(h, *q, negotiate).status().ok());
  EXPECT_TRUE(auth_send_raw(h, *q, {0x01, 0x02, 0x03}).status().ok());
  r = auth_receive_raw(h, *q);
  f = auth::decode_failure(r.data);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->explanation, static_cast<uint8_t>(FailureExplanation::incorrect_payload));
  EXPECT_EQ(h.identify(*q, p::Cns::controller, 0).status(), kAuthRequired);
  // A good transaction still works after all that.
  auto good = host_session(keys.host.get(), nullptr, 0);
  EXPECT_EQ(authenticate(h, *q, good).kind, HostStep::Kind::succeeded);
}

TEST(CoreAuth, HostWithoutASecretTryingToAuthenticateFailsButIsNotGated) {
  Keys keys;
  CoreHarness h(auth_config(keys, false));
  auto q = h.queue();
  ASSERT_TRUE(connect_admin(h, *q, kHost2, kSub1).status().ok());  // sub1: any host, no secrets
  auto host = host_session(keys.host.get(), nullptr, 0, kSub1, kHost2);
  const HostStep st = authenticate(h, *q, host);
  ASSERT_EQ(st.kind, HostStep::Kind::failed);
  EXPECT_TRUE(st.failure.by_peer);
  ASSERT_TRUE(h.enable(*q).status().ok());
  EXPECT_TRUE(h.identify(*q, p::Cns::controller, 0).status().ok());
}

TEST(CoreAuth, StatusSaysWhereSecretsComeFromNeverTheSecrets) {
  Keys keys;
  auto config = auth_config(keys, true, true);
  config.subsystems[1].host_configs[0].dhchap_ctrl_key.file = "/etc/rdmablk/keys/ctrl";
  CoreHarness h(config);
  TargetStatus status;
  h.core().fill_status(status);
  const SubsystemStatus* sub2 = nullptr;
  for (const auto& s : status.subsystems) {
    if (s.nqn == kSub2) sub2 = &s;
  }
  ASSERT_NE(sub2, nullptr);
  EXPECT_TRUE(sub2->require_authentication);
  ASSERT_EQ(sub2->dhchap_hosts.size(), 1u);
  EXPECT_EQ(sub2->dhchap_hosts[0].nqn, kHost1);
  EXPECT_EQ(sub2->dhchap_hosts[0].dhchap_key, "set");
  EXPECT_EQ(sub2->dhchap_hosts[0].dhchap_ctrl_key, "file /etc/rdmablk/keys/ctrl");
  const std::string text = subsystems_json(status).dump();
  EXPECT_NE(text.find("\"dhchap_key\":\"set\""), std::string::npos) << text;
  EXPECT_EQ(text.find("DHHC-1"), std::string::npos) << text;
  EXPECT_EQ(text.find(keys.host->format().substr(10, 16)), std::string::npos) << text;
}

}  // namespace
}  // namespace rdmablk::target::testing
