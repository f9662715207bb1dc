// End to end, DH-HMAC-CHAP: the real rdmablk-target with a host's secret in a key file (and a controller
// secret inline), driven by a raw NVMe/TCP host (ICReq, CapsuleCmd with in-capsule data, C2HData) that runs
// security::dhchap::HostAuthSession over Authentication Send / Receive the way the Linux host does: ATR in
// the Connect response, Authentication Required before, admin and I/O queue authenticated, a wrong secret
// refused with AUTH_Failure1 and logged without any secret, the failure limit, --check-config quiet about
// secrets. (Our initiator learns to authenticate separately; this host is raw on purpose.)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
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
  auto check = run_process({RDMABLK_TARGET_BINARY, "--check-config", "--config", t.config_path().string()}, t.dir(),
                           std::chrono::seconds(60));
  EXPECT_EQ(check.exit_status, 0) << check.err;
  EXPECT_EQ((check.out + check.err).find("DHHC-1"), std::string::npos);
}

TEST(AuthE2e, AKeyFileOthersCanReadIsAConfigError) {
  Secrets secrets;
  TempDir dir;
  const auto key_file = dir.path() / "host-a.key";
  write_file(key_file, secrets.host.format() + "\n");
  ::chmod(key_file.c_str(), 0644);
  const auto config = dir.path() / "target.yaml";
  write_file(config, std::string("listeners: [{address: 127.0.0.1, port: 4420}]\nsubsystems:\n  - nqn: ") + kSubnqn +
                         "\n    hosts:\n      - nqn: " + kHostA + "\n        dhchap_key_file: host-a.key\n");
  auto r = run_process({RDMABLK_TARGET_BINARY, "--check-config", "--config", config.string()}, dir.path(),
                       std::chrono::seconds(60));
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.err.find(config.string() + ":6:26: subsystems[0].hosts[0].dhchap_key_file: " +
                               key_file.string() + ": mode 0644"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("DHHC-1"), std::string::npos);
}

}  // namespace
}  // namespace e2e
