// DH-HMAC-CHAP in the initiator's Controller: a controller that requires authentication (AUTHREQ ATR in the
// Connect response) runs security::dhchap::ControllerAuthSession, the target's state machine, behind a fake
// queue (auth_fake.h); the initiator must authenticate each queue before anything else goes through.
#include <gtest/gtest.h>

#include "initiator/auth_fake.h"
#include "initiator/cli_runner.h"
#include "initiator/host/controller.h"

using namespace rdmablk;
using namespace rdmablk::initiator;
using namespace rdmablk::testing;

namespace {

std::string new_key(std::size_t length = 32, dh::KeyTransform t = dh::KeyTransform::none) {
  auto k = dh::DhchapKey::generate(length, t);
  EXPECT_TRUE(k);
  return k->format();
}

dh::DhchapKey key_of(const std::string& text) { return *dh::DhchapKey::parse(text); }

// A fake target requiring authentication with `host_secret` (and `ctrl_secret` for bidirectional).
struct AuthRig {
  FakeTarget target;
  AuthFake fake;
  std::string host_secret = new_key();
  std::string ctrl_secret = new_key(48, dh::KeyTransform::sha384);

  explicit AuthRig(bool require = true, bool controller_key = false) {
    fake.target = &target;
    if (require) fake.host_key = key_of(host_secret);
    if (controller_key) fake.ctrl_key = key_of(ctrl_secret);
  }

  ControllerOptions options(std::string_view secret, std::string_view ctrl_secret_text = {}) {
    FakeConnector unused(&target);
    ControllerOptions o = test_options(target, unused);
    o.connector = AuthFakeConnector{&fake};
    auto d = make_dhchap_settings(secret, ctrl_secret_text);
    EXPECT_TRUE(d) << d.error().message;
    if (d) o.dhchap = *d;
    return o;
  }

  // The messages the host sent on a queue, by AUTH_ID.
  std::vector<uint8_t> sent_ids(uint16_t qid) {
    std::vector<uint8_t> out;
    std::lock_guard lock(fake.mu);
    if (auto* r = fake.record(qid)) {
      for (const auto& m : r->sent) out.push_back(m.size() > 1 ? m[1] : 0xFF);
    }
    return out;
  }
};

constexpr uint8_t kNegotiate = 0x00, kReply = 0x02, kSuccess2 = 0x04, kFailure2 = 0xF0;

bool contains(const std::string& s, std::string_view what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST(ControllerAuth, UnidirectionalOnTheAdminAndEveryIoQueue) {
  AuthRig s;
  auto o = s.options(s.host_secret);
  o.io_queues = 3;
  auto ctrl = Controller::connect(o);
  ASSERT_TRUE(ctrl) << ctrl.error().message;
  EXPECT_EQ(s.fake.status(0), dh::AuthStatus::succeeded);
  EXPECT_EQ(s.sent_ids(0), (std::vector<uint8_t>{kNegotiate, kReply}));
  {
    std::lock_guard lock(s.fake.mu);
    EXPECT_EQ(s.fake.record(0)->refused, 0u);  // nothing went before the authentication
    EXPECT_FALSE(s.fake.record(0)->session->bidirectional());
    // T_ID = qid, as the kernel host sets it.
    auto h = pa::decode_header(s.fake.record(0)->sent[0]);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->t_id, 0);
  }
  // The bring-up went on after it (Identify etc. would have been refused otherwise).
  EXPECT_EQ((*ctrl)->namespaces().size(), 1u);

  for (uint16_t qid : {uint16_t{1}, uint16_t{2}}) {
    auto q = (*ctrl)->connect_io_queue(qid, 16);
    ASSERT_TRUE(q) << q.error().message;
    EXPECT_EQ(s.fake.status(qid), dh::AuthStatus::succeeded) << "qid " << qid;
    std::lock_guard lock(s.fake.mu);
    auto h = pa::decode_header(s.fake.record(qid)->sent[0]);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->t_id, qid);
  }
  // I/O works on an authenticated queue.
  auto q = (*ctrl)->connect_io_queue(3, 16);
  ASSERT_TRUE(q) << q.error().message;
  std::vector<uint8_t> block(512, 0xA5);
  auto w = (*q)->execute(protocol::to_sqe(protocol::make_write(0, 1, 7, 1, protocol::SglDescriptor{})), block,
                         transport::DataDirection::host_to_controller);
  EXPECT_TRUE(w) << w.error().message;
}

TEST(ControllerAuth, BidirectionalChecksTheControllerAndSendsSuccess2) {
  AuthRig s(true, true);
  auto ctrl = Controller::connect(s.options(s.host_secret, s.ctrl_secret));
  ASSERT_TRUE(ctrl) << ctrl.error().message;
  EXPECT_EQ(s.sent_ids(0), (std::vector<uint8_t>{kNegotiate, kReply, kSuccess2}));
  EXPECT_EQ(s.fake.status(0), dh::AuthStatus::succeeded);
  {
    std::lock_guard lock(s.fake.mu);
    EXPECT_TRUE(s.fake.record(0)->session->bidirectional());
  }
  auto q = (*ctrl)->connect_io_queue(1, 16);
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ(s.sent_ids(1), (std::vector<uint8_t>{kNegotiate, kReply, kSuccess2}));
  EXPECT_EQ(s.fake.status(1), dh::AuthStatus::succeeded);
}

TEST(ControllerAuth, OfferedHashesAndGroupsAreTheOptions) {
  AuthRig s;
  auto o = s.options(s.host_secret);
  o.dhchap.hashes = {pa::HashId::sha512};
  o.dhchap.dh_groups = {pa::DhGroupId::ffdhe2048};
  auto ctrl = Controller::connect(o);
  ASSERT_TRUE(ctrl) << ctrl.error().message;
  std::lock_guard lock(s.fake.mu);
  EXPECT_EQ(s.fake.record(0)->session->hash(), pa::HashId::sha512);
  EXPECT_EQ(s.fake.record(0)->session->dh_group(), pa::DhGroupId::ffdhe2048);
  auto n = pa::decode_negotiate(s.fake.record(0)->sent[0]);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->hash_count, 1);
  EXPECT_EQ(n->dh_group_count, 1);

  // A controller that allows nothing the host offers answers Failure1 (hash unusable).
  AuthRig t;
  t.fake.hashes = {pa::HashId::sha256};
  auto o2 = t.options(t.host_secret);
  o2.dhchap.hashes = {pa::HashId::sha384};
  auto refused = Controller::connect(o2);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(contains(refused.error().message, "AUTH_Failure1")) << refused.error().message;
}

TEST(ControllerAuth, WrongSecretFailsWithTheControllersReason) {
  AuthRig s;
  std::string wrong = new_key();
  auto ctrl = Controller::connect(s.options(wrong));
  ASSERT_FALSE(ctrl);
  const std::string& m = ctrl.error().message;
  EXPECT_TRUE(contains(m, "qid 0: authentication failed")) << m;
  EXPECT_TRUE(contains(m, "AUTH_Failure1")) << m;
  EXPECT_TRUE(contains(m, pa::to_string(pa::FailureExplanation::failed))) << m;
  EXPECT_FALSE(contains(m, wrong.substr(10, 20))) << "the secret must never be in a message";
  EXPECT_FALSE(contains(m, s.host_secret.substr(10, 20)));
  EXPECT_EQ(s.fake.status(0), dh::AuthStatus::failed);
  std::lock_guard lock(s.fake.mu);
  EXPECT_EQ(s.fake.record(0)->refused, 0u);  // the host did not go on with the bring-up
}

TEST(ControllerAuth, MissingSecretSaysWhatToPass) {
  AuthRig s;
  auto ctrl = Controller::connect(s.options({}));
  ASSERT_FALSE(ctrl);
  EXPECT_TRUE(contains(ctrl.error().message, "controller requires authentication: pass --dhchap-secret"))
      << ctrl.error().message;
  EXPECT_TRUE(s.sent_ids(0).empty());  // nothing sent without a key (as the kernel: -ENOKEY)
}

TEST(ControllerAuth, WrongControllerSecretSendsFailure2) {
  AuthRig s(true, true);
  std::string other_ctrl = new_key(48, dh::KeyTransform::sha384);
  auto ctrl = Controller::connect(s.options(s.host_secret, other_ctrl));
  ASSERT_FALSE(ctrl);
  const std::string& m = ctrl.error().message;
  EXPECT_TRUE(contains(m, "controller authentication failed")) << m;
  EXPECT_FALSE(contains(m, other_ctrl.substr(10, 20)));
  EXPECT_EQ(s.sent_ids(0), (std::vector<uint8_t>{kNegotiate, kReply, kFailure2}));
  EXPECT_EQ(s.fake.status(0), dh::AuthStatus::failed);
  std::lock_guard lock(s.fake.mu);
  EXPECT_TRUE(s.fake.record(0)->session->state().failure.by_peer);  // the controller got our Failure2
}

TEST(ControllerAuth, BidirectionalAgainstAControllerWithoutItsSecretFails) {
  AuthRig s(true, false);  // the controller cannot answer C2
  auto ctrl = Controller::connect(s.options(s.host_secret, s.ctrl_secret));
  ASSERT_FALSE(ctrl);
  EXPECT_TRUE(contains(ctrl.error().message, "authentication failed")) << ctrl.error().message;
}

TEST(ControllerAuth, GarbageFromTheControllerFailsCleanly) {
  for (auto g : {AuthFake::Garbage::random_bytes, AuthFake::Garbage::success1_first}) {
    AuthRig s;
    s.fake.garbage = g;
    auto ctrl = Controller::connect(s.options(s.host_secret));
    ASSERT_FALSE(ctrl);
    const std::string& m = ctrl.error().message;
    EXPECT_TRUE(contains(m, "qid 0: authentication failed")) << m;
    // The host told the controller why with AUTH_Failure2.
    auto ids = s.sent_ids(0);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.back(), kFailure2) << m;
    if (g == AuthFake::Garbage::success1_first) {
      EXPECT_TRUE(contains(m, pa::to_string(pa::FailureExplanation::incorrect_message))) << m;
    }
  }
  AuthRig s;
  s.fake.garbage = AuthFake::Garbage::receive_status;
  auto ctrl = Controller::connect(s.options(s.host_secret));
  ASSERT_FALSE(ctrl);
  EXPECT_TRUE(contains(ctrl.error().message, "Authentication Receive failed: Invalid Field")) << ctrl.error().message;
}

TEST(ControllerAuth, AnIoQueueThatFailsIsNamed) {
  AuthRig s;
  s.fake.garbage = AuthFake::Garbage::success1_first;
  s.fake.garbage_from_qid = 1;
  auto ctrl = Controller::connect(s.options(s.host_secret));
  ASSERT_TRUE(ctrl) << ctrl.error().message;  // the admin queue authenticated
  auto q = (*ctrl)->connect_io_queue(1, 16);
  ASSERT_FALSE(q);
  EXPECT_TRUE(contains(q.error().message, "qid 1: authentication failed")) << q.error().message;
  EXPECT_EQ(s.sent_ids(1).back(), kFailure2);
  EXPECT_FALSE((*ctrl)->failed());  // the controller itself is fine
}

TEST(ControllerAuth, SecureConcatenationIsRefused) {
  AuthRig s;
  s.fake.extra_connect_dw0 = 1u << 18;  // AUTHREQ ASCR
  auto ctrl = Controller::connect(s.options(s.host_secret));
  ASSERT_FALSE(ctrl);
  EXPECT_TRUE(contains(ctrl.error().message, "secure channel concatenation")) << ctrl.error().message;
  EXPECT_EQ(ctrl.error().errno_value, EOPNOTSUPP);
}

TEST(ControllerAuth, SecretUnusedWhenTheControllerDoesNotAsk) {
  AuthRig s(false);
  auto ctrl = Controller::connect(s.options(s.host_secret, s.ctrl_secret));
  ASSERT_TRUE(ctrl) << ctrl.error().message;
  EXPECT_TRUE(s.sent_ids(0).empty());
}

TEST(ControllerAuth, SettingsCheckTheSecretsWithoutQuotingThem) {
  auto bad = make_dhchap_settings("DHHC-1:00:notbase64!!:", {});
  ASSERT_FALSE(bad);
  EXPECT_TRUE(contains(bad.error().message, "invalid --dhchap-secret")) << bad.error().message;
  EXPECT_FALSE(contains(bad.error().message, "notbase64"));
  auto ctrl_only = make_dhchap_settings({}, new_key());
  ASSERT_FALSE(ctrl_only);
  EXPECT_TRUE(contains(ctrl_only.error().message, "--dhchap-ctrl-secret needs --dhchap-secret"));
  auto ok = make_dhchap_settings(new_key(64, dh::KeyTransform::sha512), new_key());
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->secret->secret().size(), 64u);
  EXPECT_EQ(ok->ctrl_secret->transform(), dh::KeyTransform::none);
}

// ---- the CLI against the authenticating fake --------------------------------------------------------------

TEST(ControllerAuthCli, IdentifyDiscoverAndBenchTakeTheSecrets) {
  AuthRig s(true, true);
  CliEnv env;
  env.connector = AuthFakeConnector{&s.fake};
  const std::string nqn = s.target.subnqn;
  auto r = run_cli(env, {"identify", "-a", "127.0.0.1", "-n", nqn.c_str(), "-S", s.host_secret.c_str(), "-C",
                         s.ctrl_secret.c_str()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "FAKE0001")) << r.out;
  EXPECT_EQ(s.fake.status(0), dh::AuthStatus::succeeded);
  EXPECT_FALSE(contains(r.out + r.err, s.host_secret.substr(10)));

  r = run_cli(env, {"identify", "-a", "127.0.0.1", "-n", nqn.c_str()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "controller requires authentication: pass --dhchap-secret")) << r.err;

  std::string wrong = new_key();
  r = run_cli(env, {"identify", "-a", "127.0.0.1", "-n", nqn.c_str(), "--dhchap-secret", wrong.c_str()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "AUTH_Failure1")) << r.err;
  EXPECT_FALSE(contains(r.err, wrong.substr(10)));

  // A discovery controller that requires authentication.
  s.target.discovery_entries.push_back(make_discovery_entry(nqn, "127.0.0.1", "4420", 1));
  r = run_cli(env, {"discover", "-a", "127.0.0.1", "-S", s.host_secret.c_str()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, nqn)) << r.out;

  // A malformed secret is a usage error that does not repeat it.
  r = run_cli(env, {"identify", "-a", "127.0.0.1", "-n", nqn.c_str(), "-S", "DHHC-1:00:c2VjcmV0c2VjcmV0:"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "invalid --dhchap-secret")) << r.err;
  EXPECT_FALSE(contains(r.err, "c2VjcmV0c2VjcmV0"));
  r = run_cli(env, {"identify", "-a", "127.0.0.1", "-n", nqn.c_str(), "-C", s.ctrl_secret.c_str()});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--dhchap-ctrl-secret needs --dhchap-secret")) << r.err;
}

TEST(ControllerAuthCli, BenchAuthenticatesItsQueues) {
  AuthRig s;
  CliEnv env;
  env.connector = AuthFakeConnector{&s.fake};
  char path[] = "/tmp/rdmablk-authjob.XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string job = "[j]\nrw=randwrite\nbs=4k\nsize=64k\n";
  ASSERT_EQ(::write(fd, job.data(), job.size()), static_cast<ssize_t>(job.size()));
  ::close(fd);
  const std::string nqn = s.target.subnqn;
  auto r = run_cli(env, {"bench", path, "-a", "127.0.0.1", "-n", nqn.c_str(), "-S", s.host_secret.c_str()});
  ::unlink(path);
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_EQ(s.fake.status(0), dh::AuthStatus::succeeded);
  EXPECT_EQ(s.fake.status(1), dh::AuthStatus::succeeded);  // the job's I/O queue
  EXPECT_GT(s.target.io_commands.load(), 0);
}
