// End to end, DH-HMAC-CHAP: the real rdmablk-target with a host's secret in a key file (and a controller
// secret inline), driven by a raw NVMe/TCP host (ICReq, CapsuleCmd with in-capsule data, C2HData) that runs
// security::dhchap::HostAuthSession over Authentication Send / Receive the way the Linux host does: ATR in
// the Connect response, Authentication Required before, admin and I/O queue authenticated, a wrong secret
// refused with AUTH_Failure1 and logged without any secret, the failure limit, --check-config quiet about
// secrets. (This host is raw on purpose: it checks the target without our initiator.)
// The second half drives our initiator (library and `rdmablk` CLI) against the same target: the right secret
// with verified I/O, wrong and missing secrets, require_authentication, bidirectional with a right and a wrong
// controller secret, key file modes at start and reload, and I/O queues of several queues and bench jobs.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "e2e_common.h"
#include "protocol/auth.h"
#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/fabrics.h"
#include "protocol/properties.h"
#include "protocol/tcp_pdu.h"
#include "security/dhchap_key.h"
#include "security/dhchap_session.h"

namespace e2e {
namespace {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;
namespace auth = rdmablk::protocol::auth;
using rdmablk::security::dhchap::DhchapKey;
using rdmablk::security::dhchap::HostAuthParams;
using rdmablk::security::dhchap::HostAuthSession;
using rdmablk::security::dhchap::HostStep;
using rdmablk::security::dhchap::KeyTransform;

const p::Status kAuthRequired{p::StatusCodeType::command_specific, 0x91, true};
constexpr uint32_t kAtr = 1u << 17;
const std::array<uint8_t, 16> kHostId{0xa1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

// A minimal NVMe/TCP host on a blocking socket: no digests, in-capsule data for host-to-controller
// transfers (<= 8 KiB on the admin queue, 16 KiB on I/O queues), C2HData for the other direction.
class RawHost {
 public:
  explicit RawHost(uint16_t port) : fd_(raw_connect(port)) {
    if (fd_ < 0) return;
    auto req = pt::build_icreq({});
    std::vector<uint8_t> b(sizeof(req));
    p::store(b.data(), req);
    ok_ = send_all(b) && recv_exact(pt::kIcPduLen).size() == pt::kIcPduLen;
  }
  ~RawHost() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }

  struct Result {
    p::Status status;
    uint32_t dw0 = 0;
    std::vector<uint8_t> data;  // C2HData received
  };

  // One command; in-capsule data when `in` is not empty.
  std::optional<Result> command(p::Sqe sqe, const std::vector<uint8_t>& in = {}) {
    const uint16_t cid = ++cid_;
    sqe.hdr.cid.set(cid);
    std::vector<uint8_t> pdu(pt::kCapsuleCmdHlen + in.size());
    pdu[0] = static_cast<uint8_t>(pt::PduType::capsule_cmd);
    pdu[2] = pt::kCapsuleCmdHlen;
    pdu[3] = in.empty() ? 0 : pt::kCapsuleCmdHlen;
    const auto plen = static_cast<uint32_t>(pdu.size());
    std::memcpy(&pdu[4], &plen, 4);
    std::memcpy(&pdu[8], &sqe, sizeof(sqe));
    if (!in.empty()) std::memcpy(&pdu[pt::kCapsuleCmdHlen], in.data(), in.size());
    if (!send_all(pdu)) return std::nullopt;
    Result r;
    for (;;) {
      auto ch = recv_exact(8);
      if (ch.size() != 8) return std::nullopt;
      uint32_t len = 0;
      std::memcpy(&len, &ch[4], 4);
      if (len < 8 || len > (1u << 20)) return std::nullopt;
      auto rest = recv_exact(len - 8);
      if (rest.size() != len - 8) return std::nullopt;
      std::vector<uint8_t> whole = ch;
      whole.insert(whole.end(), rest.begin(), rest.end());
      if (ch[0] == static_cast<uint8_t>(pt::PduType::c2h_data)) {
        const uint8_t pdo = ch[3];
        r.data.insert(r.data.end(), whole.begin() + pdo, whole.end());
        if ((ch[1] & pt::kFlagSuccess) != 0) {
          r.status = p::Status{};
          return r;
        }
        continue;
      }
      if (ch[0] != static_cast<uint8_t>(pt::PduType::capsule_resp) || whole.size() < pt::kCapsuleRespHlen) {
        return std::nullopt;
      }
      p::Cqe cqe{};
      std::memcpy(&cqe, &whole[8], sizeof(cqe));
      r.status = cqe.get_status();
      r.dw0 = cqe.dw0.get();
      return r;
    }
  }

  std::optional<Result> connect(uint16_t qid, uint16_t cntlid, const std::string& hostnqn) {
    auto data = p::make_connect_data(kHostId, cntlid, kSubnqn, hostnqn);
    std::vector<uint8_t> bytes(sizeof(data));
    std::memcpy(bytes.data(), &data, sizeof(data));
    return command(p::to_sqe(p::make_connect(0, qid, qid == 0 ? 31 : 31, 0, 0,
                                             p::make_in_capsule_sgl(0, p::kConnectDataSize))),
                   bytes);
  }

  // Runs the host's DH-HMAC-CHAP transaction; returns its last step.
  HostStep authenticate(HostAuthSession& host) {
    for (int i = 0; i < 10; ++i) {
      const HostStep st = host.step();
      if (st.kind == HostStep::Kind::send) {
        std::vector<uint8_t> msg(st.message.begin(), st.message.end());
        const auto n = static_cast<uint32_t>(msg.size());
        auto r = command(p::to_sqe(auth::make_authentication_send(0, n, p::make_in_capsule_sgl(0, n))), msg);
        if (!r || !r->status.ok()) {
          host.abort("Authentication Send failed");
          continue;
        }
        host.sent();
      } else if (st.kind == HostStep::Kind::receive) {
        auto r = command(p::to_sqe(auth::make_authentication_receive(0, st.receive_length,
                                                                     p::make_transport_sgl(st.receive_length))));
        if (!r || !r->status.ok()) {
          host.abort("Authentication Receive failed");
          continue;
        }
        host.received(r->data);
      } else {
        return st;
      }
    }
    return host.step();
  }

 private:
  bool send_all(const std::vector<uint8_t>& b) {
    std::size_t off = 0;
    while (off < b.size()) {
      ssize_t n = ::send(fd_, b.data() + off, b.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  }
  std::vector<uint8_t> recv_exact(std::size_t n) {
    std::vector<uint8_t> out(n);
    std::size_t got = 0;
    while (got < n) {
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, 30000) <= 0) break;  // a hang, not a delay
      ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    out.resize(got);
    return out;
  }

  int fd_ = -1;
  bool ok_ = false;
  uint16_t cid_ = 0;
};

HostAuthSession session(const DhchapKey& host_key, const DhchapKey* ctrl_key, uint16_t t_id,
                        const std::string& hostnqn = kHostA) {
  HostAuthParams params;
  params.host_key = &host_key;
  params.ctrl_key = ctrl_key;
  params.host_nqn = hostnqn;
  params.subsys_nqn = kSubnqn;
  params.t_id = t_id;
  auto s = HostAuthSession::create(params);
  EXPECT_TRUE(s);
  return std::move(*s);
}

p::Sqe identify_sqe() { return p::to_sqe(p::make_identify(0, p::Cns::controller, 0, p::make_transport_sgl(4096))); }

struct Secrets {
  DhchapKey host = *DhchapKey::generate(32, KeyTransform::sha256);
  DhchapKey ctrl = *DhchapKey::generate(48, KeyTransform::none);
};

// Host A authenticates (secret in a 0600 key file, controller secret inline); host B may connect without.
std::string auth_config(const TargetProcess& t, const Secrets& s) {
  const auto key_file = t.dir() / "host-a.key";
  write_file(key_file, s.host.format() + "\n");
  ::chmod(key_file.c_str(), 0600);
  return config_with_namespaces(kRamNamespace, std::string("    hosts:\n") + "      - nqn: " + kHostA + "\n" +
                                                   "        dhchap_key_file: " + key_file.string() + "\n" +
                                                   "        dhchap_ctrl_key: \"" + s.ctrl.format() + "\"\n" +
                                                   "        dhchap_dhgroups: [ffdhe3072, null]\n" + "      - " +
                                                   kHostB + "\n");
}

TEST(AuthE2e, RawHostAuthenticatesAdminAndIoQueuesAndAWrongSecretIsRefused) {
  Secrets secrets;
  TargetProcess t;
  ASSERT_TRUE(t.start(auth_config(t, secrets)));

  // Admin queue: ATR, Authentication Required until authenticated (bidirectional), then Identify works.
  RawHost admin(t.io_port());
  ASSERT_TRUE(admin.ok());
  auto c = admin.connect(0, p::kCntlidDynamic, kHostA);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->status.ok()) << p::status_name(c->status);
  EXPECT_EQ(c->dw0 & kAtr, kAtr);
  const uint16_t cntlid = p::connect_result_cntlid(c->dw0);
  auto id = admin.command(identify_sqe());
  ASSERT_TRUE(id);
  EXPECT_EQ(id->status, kAuthRequired);
  auto host = session(secrets.host, &secrets.ctrl, 0);
  const HostStep st = admin.authenticate(host);
  ASSERT_EQ(st.kind, HostStep::Kind::succeeded) << st.failure.what;
  EXPECT_EQ(host.dh_group(), auth::DhGroupId::ffdhe3072);
  auto en = admin.command(p::to_sqe(p::make_property_set(0, p::property::cc, p::Cc{}.set_en(true).set_iosqes(6).set_iocqes(4).value, false)));
  ASSERT_TRUE(en && en->status.ok());
  id = admin.command(identify_sqe());
  ASSERT_TRUE(id);
  EXPECT_TRUE(id->status.ok()) << p::status_name(id->status);
  EXPECT_EQ(id->data.size(), 4096u);

  // An I/O queue authenticates on its own (T_ID = qid, as the kernel host), then reads.
  RawHost io(t.io_port());
  ASSERT_TRUE(io.ok());
  auto ic = io.connect(1, cntlid, kHostA);
  ASSERT_TRUE(ic && ic->status.ok());
  EXPECT_EQ(ic->dw0 & kAtr, kAtr);
  const auto read_sqe = p::to_sqe(p::make_read(0, 1, 0, 8, p::make_transport_sgl(4096)));
  auto rd = io.command(read_sqe);
  ASSERT_TRUE(rd);
  EXPECT_EQ(rd->status, kAuthRequired);
  auto io_host = session(secrets.host, &secrets.ctrl, 1);
  ASSERT_EQ(io.authenticate(io_host).kind, HostStep::Kind::succeeded);
  rd = io.command(read_sqe);
  ASSERT_TRUE(rd);
  EXPECT_TRUE(rd->status.ok()) << p::status_name(rd->status);
  EXPECT_EQ(rd->data.size(), 4096u);

  // Host B has no secret: no ATR, no authentication.
  RawHost b(t.io_port());
  auto cb = b.connect(0, p::kCntlidDynamic, kHostB);
  ASSERT_TRUE(cb && cb->status.ok());
  EXPECT_EQ(cb->dw0 & kAtr, 0u);

  // A wrong secret: AUTH_Failure1, the queue stays refused, one log line without the secret.
  auto wrong = *DhchapKey::generate(32, KeyTransform::sha256);
  RawHost bad(t.io_port());
  auto cbad = bad.connect(0, p::kCntlidDynamic, kHostA);
  ASSERT_TRUE(cbad && cbad->status.ok());
  auto bad_host = session(wrong, nullptr, 0);
  const HostStep bs = bad.authenticate(bad_host);
  ASSERT_EQ(bs.kind, HostStep::Kind::failed);
  EXPECT_TRUE(bs.failure.by_peer);
  id = bad.command(identify_sqe());
  ASSERT_TRUE(id);
  EXPECT_EQ(id->status, kAuthRequired);
  EXPECT_TRUE(t.wait_for_log("DH-HMAC-CHAP authentication of host " + std::string(kHostA))) << t.log();
  EXPECT_TRUE(t.wait_for_log("host response mismatch")) << t.log();
  const std::string log = t.log();
  EXPECT_EQ(log.find("DHHC-1"), std::string::npos) << "a secret in the log";
  EXPECT_NE(log.find("DH-HMAC-CHAP for 1 host"), std::string::npos) << log;

  // --check-config (once the ports are free again) says nothing about the secrets either.
  ASSERT_TRUE(t.stop());
  auto check = run_target({"--check-config", "--config", t.config_path().string()}, t.dir());
  EXPECT_EQ(check.exit_status, 0) << check.err;
  EXPECT_EQ((check.out + check.err).find("DHHC-1"), std::string::npos);
}

TEST(AuthE2e, AKeyFileOthersCanReadIsAConfigError) {
  Secrets secrets;
  TempDir dir(kE2eDir);
  const auto key_file = dir.path() / "host-a.key";
  write_file(key_file, secrets.host.format() + "\n");
  ::chmod(key_file.c_str(), 0644);
  const auto config = dir.path() / "target.yaml";
  write_file(config, std::string("listeners: [{address: 127.0.0.1, port: 4420}]\nsubsystems:\n  - nqn: ") + kSubnqn +
                         "\n    hosts:\n      - nqn: " + kHostA + "\n        dhchap_key_file: host-a.key\n");
  auto r = run_target({"--check-config", "--config", config.string()}, dir.path());
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.err.find(config.string() + ":6:26: subsystems[0].hosts[0].dhchap_key_file: " +
                               key_file.string() + ": mode 0644"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("DHHC-1"), std::string::npos);
}


// ---- our initiator (library and CLI) against the real target ------------------------------------------------

using rdmablk::initiator::Controller;
using rdmablk::initiator::ControllerOptions;
using rdmablk::initiator::IoQueue;
using rdmablk::initiator::make_dhchap_settings;

// DHHC-1 text of fresh secrets: the host's (SHA-256 transformed, as `nvme gen-dhchap-key --hmac=1` prints),
// the controller's (SHA-384 transformed), and wrong ones of the same kinds.
struct KeyTexts {
  std::string host = DhchapKey::generate(32, KeyTransform::sha256)->format();
  std::string ctrl = DhchapKey::generate(48, KeyTransform::sha384)->format();
  std::string wrong = DhchapKey::generate(32, KeyTransform::sha256)->format();
  std::string wrong_ctrl = DhchapKey::generate(48, KeyTransform::sha384)->format();
  std::vector<std::string> all() const { return {host, ctrl, wrong, wrong_ctrl}; }
};

// The base64 part of "DHHC-1:XX:<base64>:": what a leak would show.
std::string base64_part(const std::string& text) { return text.substr(10, text.size() - 11); }

// Fails when any secret (or any DHHC-1 text at all) is in `text`.
void expect_no_secret(const std::string& text, const KeyTexts& keys, const std::string& where) {
  for (const auto& k : keys.all()) {
    ASSERT_GT(base64_part(k).size(), 40u);
    EXPECT_EQ(text.find(base64_part(k)), std::string::npos) << "a secret in " << where;
  }
  EXPECT_EQ(text.find("DHHC-1"), std::string::npos) << "a DHHC-1 string in " << where;
}

// Writes a key file with `mode` into the target's directory (keys/NAME, relative to the config).
std::string key_file(const TargetProcess& t, const std::string& name, const std::string& text, mode_t mode) {
  std::filesystem::create_directories(t.dir() / "keys");
  const auto path = t.dir() / "keys" / name;
  write_file(path, text + "\n");
  ::chmod(path.c_str(), mode);
  return "keys/" + name;
}

// A subsystem's `hosts:` list; each entry is the YAML lines after "- " (indented for a list item).
std::string hosts_yaml(const std::vector<std::string>& entries, bool require_authentication = false) {
  std::string y = require_authentication ? "    require_authentication: true\n" : "";
  y += "    hosts:\n";
  for (const auto& e : entries) y += "      - " + e;
  return y;
}
std::string host_a_with_key(const std::string& key_line, const std::string& extra = "") {
  return std::string("nqn: ") + kHostA + "\n        " + key_line + "\n" + extra;
}

ControllerOptions auth_options(const TargetProcess& t, const std::string& secret, const std::string& ctrl_secret,
                               const std::string& hostnqn = kHostA, uint16_t io_queues = 1) {
  auto o = controller_options(t.io_port(), kSubnqn, hostnqn, 120'000, io_queues);
  auto d = make_dhchap_settings(secret, ctrl_secret);
  EXPECT_TRUE(d) << (d ? "" : d.error().message);
  if (d) o.dhchap = std::move(*d);
  return o;
}

// A connect that must fail: its message.
std::string connect_error(const ControllerOptions& o) {
  auto c = Controller::connect(o);
  EXPECT_FALSE(c) << "the connect succeeded";
  return c ? std::string() : c.error().message;
}

// Writes `bytes` of a pattern at `slba` on queue `q` and reads them back (block size 512).
void verified_write_read(IoQueue& q, uint64_t slba, uint32_t bytes, uint32_t seed) {
  auto data = pattern(bytes, seed);
  auto w = write_blocks(q, 1, slba, 512, data);
  ASSERT_TRUE(w) << w.error().message;
  ASSERT_TRUE(w->get_status().ok()) << rdmablk::initiator::describe_status(w->get_status());
  std::vector<uint8_t> back(bytes, 0);
  auto r = read_blocks(q, 1, slba, 512, back);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->get_status().ok()) << rdmablk::initiator::describe_status(r->get_status());
  EXPECT_TRUE(back == data) << "data read back differs at lba " << slba;
}

// `rdmablk identify -t tcp -a 127.0.0.1 -s PORT -n SUBNQN -q HOST --hostid ID [EXTRA...]`
ProcessResult cli_identify(const TargetProcess& t, const std::vector<std::string>& extra,
                           const std::string& hostnqn = kHostA) {
  std::vector<std::string> argv{RDMABLK_CLI_BINARY, "identify", "-t", "tcp", "-a", "127.0.0.1", "-s",
                                std::to_string(t.io_port()), "-n", kSubnqn, "-q", hostnqn, "--hostid",
                                rdmablk::initiator::format_uuid(host_identity(hostnqn).hostid)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_process(argv, t.dir(), 60s);
}

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// The host's secret in a 0600 key file: identify and verified I/O through the library, identify through the CLI.
TEST(AuthE2e, InitiatorAuthenticatesWithAKeyFileSecretAndMovesVerifiedData) {
  KeyTexts keys;
  TargetProcess t;
  const std::string file = key_file(t, "host-a.key", keys.host, 0600);
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace, hosts_yaml({host_a_with_key("dhchap_key_file: " + file)}))));

  auto ctrl = connect_or_fail(auth_options(t, keys.host, ""), t);
  ASSERT_TRUE(ctrl);
  ASSERT_NE(ctrl->find_namespace(1), nullptr);
  auto q = io_queue_or_fail(*ctrl, 1);
  ASSERT_TRUE(q);
  verified_write_read(*q, 0, 4096, 1);          // in-capsule write
  verified_write_read(*q, 2048, 128 * 1024, 2);  // R2T + H2CData write, multi-PDU read
  q->disconnect();
  EXPECT_TRUE(ctrl->shutdown());
  // The controller picks its first allowed hash and group that the host offers: sha256, null.
  EXPECT_TRUE(t.wait_for_log(std::string("qid 0: host ") + kHostA + " authenticated (sha256, null)")) << t.log();

  auto r = cli_identify(t, {"-S", keys.host});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, kSubnqn)) << r.out;
  expect_no_secret(r.out + r.err, keys, "the CLI's output");
  expect_no_secret(t.log(), keys, "the target log");
}

// A wrong secret: AUTH_Failure1, logged by the target without the secret; no secret at all: the hint, nothing
// sent. The right secret still works afterwards (two failures are far from the block limit).
TEST(AuthE2e, WrongOrMissingSecretIsRefused) {
  KeyTexts keys;
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(
      kRamNamespace, hosts_yaml({host_a_with_key("dhchap_key: \"" + keys.host + "\"")}))));

  std::string err = connect_error(auth_options(t, keys.wrong, ""));
  EXPECT_TRUE(contains(err, "qid 0: authentication failed: the controller answered AUTH_Failure1")) << err;
  EXPECT_TRUE(t.wait_for_log(std::string("DH-HMAC-CHAP authentication of host ") + kHostA + " from")) << t.log();

  auto r = cli_identify(t, {"--dhchap-secret", keys.wrong});
  EXPECT_EQ(r.exit_status, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "AUTH_Failure1")) << r.err;
  expect_no_secret(r.out + r.err, keys, "the CLI's output");

  err = connect_error(auth_options(t, "", ""));
  EXPECT_TRUE(contains(err, "qid 0: controller requires authentication: pass --dhchap-secret")) << err;
  r = cli_identify(t, {});
  EXPECT_EQ(r.exit_status, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "controller requires authentication: pass --dhchap-secret")) << r.err;

  auto ctrl = connect_or_fail(auth_options(t, keys.host, ""), t);
  ASSERT_TRUE(ctrl);
  EXPECT_TRUE(ctrl->shutdown());

  // Two failed transactions (library and CLI), each one warning line; no secret anywhere.
  const std::string log = t.log();
  std::size_t failures = 0;
  for (auto at = log.find("DH-HMAC-CHAP authentication of host"); at != std::string::npos;
       at = log.find("DH-HMAC-CHAP authentication of host", at + 1)) {
    ++failures;
  }
  EXPECT_EQ(failures, 2u) << log;
  EXPECT_TRUE(contains(log, "host response mismatch")) << log;
  expect_no_secret(log, keys, "the target log");
}

// require_authentication: a host without a configured secret is refused at Connect (whatever it brings); the
// host with one connects.
TEST(AuthE2e, RequireAuthenticationRefusesAHostWithoutASecretAtConnect) {
  KeyTexts keys;
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(
      kRamNamespace,
      hosts_yaml({host_a_with_key("dhchap_key: \"" + keys.host + "\""), std::string("nqn: ") + kHostB + "\n"}, true))));
  EXPECT_TRUE(contains(t.log(), "this host will be refused")) << t.log();

  for (const std::string& secret : {std::string(), keys.host}) {
    const std::string err = connect_error(auth_options(t, secret, "", kHostB));
    EXPECT_TRUE(contains(err, "Connect (qid 0, hostnqn " + std::string(kHostB) + ") rejected")) << err;
    EXPECT_FALSE(contains(err, "authentication")) << "refused before any authentication: " << err;
  }
  EXPECT_TRUE(t.wait_for_log(std::string("host ") + kHostB + " has no DH-HMAC-CHAP secret and " + kSubnqn +
                             " requires authentication"))
      << t.log();
  auto r = cli_identify(t, {}, kHostB);
  EXPECT_EQ(r.exit_status, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "rejected")) << r.err;

  auto ctrl = connect_or_fail(auth_options(t, keys.host, ""), t);
  ASSERT_TRUE(ctrl);
  EXPECT_TRUE(ctrl->shutdown());
  expect_no_secret(t.log(), keys, "the target log");
}

// Bidirectional: the controller's secret from a 0600 file. The right controller secret on the host side: I/O
// works; a wrong one: the host refuses the controller (AUTH_Failure2) and the target logs the host's report;
// without -C the host authenticates one way only, which the target accepts.
TEST(AuthE2e, BidirectionalAuthenticationChecksTheController) {
  KeyTexts keys;
  TargetProcess t;
  const std::string file = key_file(t, "ctrl-a.key", keys.ctrl, 0600);
  ASSERT_TRUE(t.start(config_with_namespaces(
      kRamNamespace, hosts_yaml({host_a_with_key("dhchap_key: \"" + keys.host + "\"",
                                                 "        dhchap_ctrl_key_file: " + file + "\n" +
                                                     "        dhchap_dhgroups: [ffdhe2048]\n")}))));

  auto ctrl = connect_or_fail(auth_options(t, keys.host, keys.ctrl), t);
  ASSERT_TRUE(ctrl);
  auto q = io_queue_or_fail(*ctrl, 1);
  ASSERT_TRUE(q);
  verified_write_read(*q, 64, 32 * 1024, 3);
  q->disconnect();
  EXPECT_TRUE(ctrl->shutdown());
  EXPECT_TRUE(t.wait_for_log(std::string("qid 0: host ") + kHostA + " authenticated (sha256, ffdhe2048, bidirectional)"))
      << t.log();

  const std::string err = connect_error(auth_options(t, keys.host, keys.wrong_ctrl));
  EXPECT_TRUE(contains(err, "qid 0: controller authentication failed")) << err;
  EXPECT_TRUE(contains(err, "AUTH_Failure2 sent")) << err;
  EXPECT_TRUE(t.wait_for_log("reported by the host")) << t.log();

  auto r = cli_identify(t, {"-S", keys.host, "-C", keys.ctrl});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, kSubnqn)) << r.out;
  r = cli_identify(t, {"-S", keys.host, "-C", keys.wrong_ctrl});
  EXPECT_EQ(r.exit_status, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "controller authentication failed")) << r.err;
  expect_no_secret(r.out + r.err, keys, "the CLI's output");

  auto one_way = connect_or_fail(auth_options(t, keys.host, ""), t);
  ASSERT_TRUE(one_way);
  EXPECT_TRUE(one_way->shutdown());
  expect_no_secret(t.log(), keys, "the target log");
}

// Key files others may read (or write) stop the daemon at start and are refused by a reload, which keeps the
// running keys; the message names the file and its mode, never the secret. --check-config, warnings included,
// says nothing secret either.
TEST(AuthE2e, KeyFilesOthersCanAccessAreRefusedAtStartAndReload) {
  KeyTexts keys;
  for (mode_t mode : {mode_t{0644}, mode_t{0620}, mode_t{0602}}) {
    TempDir dir(kE2eDir);
    std::filesystem::create_directories(dir.path() / "keys");
    const auto path = dir.path() / "keys" / "host-a.key";
    write_file(path, keys.host + "\n");
    ::chmod(path.c_str(), mode);
    const auto config = dir.path() / "target.yaml";
    write_file(config, "listeners: [{address: 127.0.0.1, port: " + std::to_string(pick_free_port()) +
                           "}]\nsubsystems:\n  - nqn: " + kSubnqn + "\n    hosts:\n      - nqn: " + kHostA +
                           "\n        dhchap_key_file: keys/host-a.key\n");
    auto r = run_target({"--config", config.string()}, dir.path());
    char octal[8];
    std::snprintf(octal, sizeof(octal), "%04o", static_cast<unsigned>(mode));
    EXPECT_EQ(r.exit_status, 2) << "mode " << octal << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "dhchap_key_file: " + path.string() + ": mode " + octal)) << r.err;
    expect_no_secret(r.out + r.err, keys, "the start error");
  }

  // A running target: a reload that names a 0644 key file fails and the old key keeps working.
  TargetProcess t;
  const std::string good = key_file(t, "host-a.key", keys.host, 0600);
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace, hosts_yaml({host_a_with_key("dhchap_key_file: " + good)}))));
  const std::string open_file = key_file(t, "host-a-new.key", keys.wrong, 0644);
  const auto from = t.log_size();
  EXPECT_FALSE(t.reload(config_with_namespaces(kRamNamespace, hosts_yaml({host_a_with_key("dhchap_key_file: " + open_file)}))));
  EXPECT_TRUE(t.wait_for_log("mode 0644", 30s, from)) << t.log();
  auto ctrl = connect_or_fail(auth_options(t, keys.host, ""), t);
  ASSERT_TRUE(ctrl);
  EXPECT_TRUE(ctrl->shutdown());
  expect_no_secret(t.log(), keys, "the target log");

  // --check-config of a config with an inline secret, a key file and a warning (a host that will be refused).
  TempDir dir(kE2eDir);
  const auto kf = dir.path() / "ctrl.key";
  write_file(kf, keys.ctrl + "\n");
  ::chmod(kf.c_str(), 0400);
  const auto config = dir.path() / "target.yaml";
  write_file(config, "listeners: [{address: 127.0.0.1, port: " + std::to_string(pick_free_port()) +
                         "}]\nsubsystems:\n  - nqn: " + kSubnqn + "\n    require_authentication: true\n" +
                         "    hosts:\n      - nqn: " + kHostA + "\n        dhchap_key: \"" + keys.host +
                         "\"\n        dhchap_ctrl_key_file: ctrl.key\n      - " + kHostB + "\n");
  auto check = run_target({"--check-config", "--config", config.string()}, dir.path());
  EXPECT_EQ(check.exit_status, 0) << check.err;
  EXPECT_TRUE(contains(check.err, "warning:")) << check.err;
  expect_no_secret(check.out + check.err, keys, "--check-config output");
}

// Every I/O queue authenticates on its own (T_ID = qid): several queues of one controller, then the bench with
// parallel jobs (each job a controller with its own admin and I/O queue), bidirectionally, data verified. The
// target logs each queue's success at debug level.
TEST(AuthE2e, IoQueuesAuthenticateForSeveralQueuesAndBenchJobs) {
  KeyTexts keys;
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(
      kRamNamespace,
      hosts_yaml({host_a_with_key("dhchap_key: \"" + keys.host + "\"", "        dhchap_ctrl_key: \"" + keys.ctrl + "\"\n")}),
      "log_level: debug\n")));

  constexpr uint16_t kQueues = 3;
  auto ctrl = connect_or_fail(auth_options(t, keys.host, keys.ctrl, kHostA, kQueues), t);
  ASSERT_TRUE(ctrl);
  ASSERT_EQ(ctrl->granted_io_queues(), kQueues);
  for (uint16_t qid = 1; qid <= kQueues; ++qid) {
    auto q = io_queue_or_fail(*ctrl, qid);
    ASSERT_TRUE(q);
    verified_write_read(*q, 4096u * qid, 8192, 10 + qid);
    EXPECT_TRUE(t.wait_for_log("qid " + std::to_string(qid) + ": host " + kHostA + " authenticated")) << t.log();
    q->disconnect();
  }
  EXPECT_TRUE(ctrl->shutdown());

  const std::size_t from = t.log_size();
  const auto job_path = t.dir() / "auth.fio";
  write_file(job_path, R"([global]
namespace=1
bs=4k
iodepth=8

[writers]
rw=randwrite
size=2m
numjobs=3
offset_increment=4m
verify=crc32c
)");
  auto argv = bench_argv(t, job_path.string());
  for (const std::string& a : {std::string("-S"), keys.host, std::string("-C"), keys.ctrl}) argv.push_back(a);
  auto r = run_process(argv, t.dir(), 180s);
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.exit_status, 0) << r.err << "\n" << r.out << "\n--- target log ---\n" << t.log();
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ASSERT_EQ(j["jobs"].size(), 3u) << j.dump(2);
  for (const auto& job : j["jobs"]) {
    EXPECT_EQ(job["error"], 0) << job.dump(2);
    EXPECT_EQ(job["write"]["io_bytes"], 2u << 20);
    EXPECT_EQ(job["read"]["io_bytes"], 2u << 20);  // the verify pass
  }
  expect_no_secret(r.out + r.err, keys, "the bench's output");
  // Three controllers, each admin queue and qid 1 authenticated bidirectionally.
  const std::string log = t.log().substr(from);
  auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (auto at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(std::string("qid 0: host ") + kHostA + " authenticated (sha256, null, bidirectional)"), 3u) << log;
  EXPECT_EQ(count(std::string("qid 1: host ") + kHostA + " authenticated (sha256, null, bidirectional)"), 3u) << log;
  EXPECT_EQ(count("DH-HMAC-CHAP authentication of host"), 0u) << log;
  expect_no_secret(t.log(), keys, "the target log");
}

}  // namespace
}  // namespace e2e
