// Target core and NVMe/TCP TLS: a queue that came over TLS may only Connect as the host and to the subsystem
// its PSK identity names (else Connect Invalid Host with IPO at the mismatching field); a plain queue on a
// `tls: optional` listener is served, also for a host with a PSK (as nvmet with TREQ "not required"); the
// discovery log's TREQ/TSAS follow each listener's policy.
#include "security/tls_psk.h"
#include "target/control/control_api.h"
#include "target/core_test_util.h"

namespace rdmablk::target::testing {
namespace {

transport::TlsIdentity identity(const char* hostnqn, const char* subnqn) {
  return {std::string("NVMe1R01 ") + hostnqn + " " + subnqn + " digest", hostnqn, subnqn, false};
}

TEST(CoreTls, ConnectMustMatchTheTlsIdentity) {
  CoreHarness h;
  auto q = h.queue();
  q->tls = identity(kHost1, kSub1);
  auto ok = h.connect(*q, 0, 31, kSub1, kHost1);
  EXPECT_TRUE(ok.status().ok()) << p::status_name(ok.status());
  EXPECT_TRUE(q->connected);

  // Another host behind host 1's PSK: Invalid Host, IPO = the host NQN's offset in the Connect data (512).
  auto other_host = h.queue();
  other_host->tls = identity(kHost1, kSub1);
  auto c = h.connect(*other_host, 0, 31, kSub1, kHost2);
  EXPECT_EQ(c.status(), st::connect_invalid_host) << p::status_name(c.status());
  EXPECT_EQ(c.dw0(), p::connect_invalid_param_result(true, 512));
  EXPECT_FALSE(other_host->connected);

  // The right host, another subsystem than the key was made for: IPO = the subsystem NQN's offset (256).
  auto other_sub = h.queue();
  other_sub->tls = identity(kHost1, kSub1);
  c = h.connect(*other_sub, 0, 31, kSub2, kHost1);
  EXPECT_EQ(c.status(), st::connect_invalid_host) << p::status_name(c.status());
  EXPECT_EQ(c.dw0(), p::connect_invalid_param_result(true, 256));
  EXPECT_FALSE(other_sub->connected);
  EXPECT_EQ(h.core().controller_count(), 1u);
}

TEST(CoreTls, IoQueueConnectIsCheckedToo) {
  CoreHarness h;
  auto admin = h.queue();
  admin->tls = identity(kHost1, kSub1);
  const uint16_t cntlid = h.bring_up(*admin, kSub1, kHost1);
  auto io = h.queue();
  io->tls = identity(kHost2, kSub1);  // a different host's PSK for the I/O queue of host 1's controller
  auto c = h.connect(*io, 1, 127, kSub1, kHost1, cntlid);
  EXPECT_EQ(c.status(), st::connect_invalid_host) << p::status_name(c.status());
  EXPECT_FALSE(io->connected);
  auto good = h.queue();
  good->tls = identity(kHost1, kSub1);
  c = h.connect(*good, 1, 127, kSub1, kHost1, cntlid);
  EXPECT_TRUE(c.status().ok()) << p::status_name(c.status());
}

TEST(CoreTls, PlainQueuesAreServedWhereTheListenerAllowsThem) {
  // The core does not refuse a plain queue: the listener's policy does (required closes a plain connection
  // before ICReq). On an optional listener a host with a PSK may connect without TLS, as nvmet allows.
  auto config = test_config();
  config.listeners[0].tls = transport::tcp::TlsPolicy::optional;
  CoreHarness h(config);
  auto q = h.queue();
  auto c = h.connect(*q, 0, 31, kSub1, kHost1);
  EXPECT_TRUE(c.status().ok()) << p::status_name(c.status());
}

TEST(CoreTls, DiscoveryLogSaysEachListenersSecureChannel) {
  auto config = test_config();
  config.listeners[0].tls = transport::tcp::TlsPolicy::required;  // 0.0.0.0:4420 io
  ListenerConfig optional = config.listeners[0];
  optional.port = 4421;
  optional.tls = transport::tcp::TlsPolicy::optional;
  config.listeners.push_back(optional);
  CoreHarness h(config);
  auto q = h.queue(transport::TransportType::tcp, "10.0.0.1", 8009);  // the plain discovery listener
  h.bring_up(*q, p::kDiscoveryNqn, kHost2);
  auto c = h.get_log(*q, p::LogPageId::discovery, 0, 4096);
  ASSERT_TRUE(c.status().ok());
  const auto numrec = from_bytes<p::le64>(c.data, 8).get();
  ASSERT_EQ(numrec, 3u);  // the current discovery subsystem, sub1 on 4420 and on 4421
  std::map<uint16_t, std::pair<uint8_t, uint8_t>> by_port;  // port -> (TREQ secure bits, SECTYPE)
  for (uint64_t i = 0; i < numrec; ++i) {
    const auto e = from_bytes<p::DiscoveryLogEntry>(c.data, 1024 + i * 1024);
    const uint16_t port = static_cast<uint16_t>(std::stoi(std::string(e.trsvcid.data(), strnlen(e.trsvcid.data(), 32))));
    by_port[port] = {static_cast<uint8_t>(e.treq & p::treq::kSecureMask), e.tcp_tsas().sectype};
  }
  EXPECT_EQ(by_port[8009], std::pair(p::treq::kSecureNotSpecified, uint8_t{0}));
  EXPECT_EQ(by_port[4420], std::pair(p::treq::kSecureRequired, static_cast<uint8_t>(p::TcpSecType::tls13)));
  EXPECT_EQ(by_port[4421], std::pair(p::treq::kSecureNotRequired, static_cast<uint8_t>(p::TcpSecType::tls13)));
}

TEST(CoreTls, StatusSaysWhichHostsHaveAPskAndWhereItComesFromNeverTheKey) {
  auto config = test_config();
  auto psk = security::generate_configured_psk(security::PskHash::sha256);
  ASSERT_TRUE(psk);
  const std::string text_key = *security::format_psk_interchange(*psk);
  HostConfig host;
  host.nqn = kHost1;
  host.tls_psk.key = std::make_shared<const security::ConfiguredPsk>(*psk);
  host.tls_psk.file = "/etc/rdmablk/keys/host1.psk";
  config.subsystems[1].host_configs = {host};
  CoreHarness h(config);
  TargetStatus status;
  h.core().fill_status(status);
  const SubsystemStatus* sub2 = nullptr;
  for (const auto& s : status.subsystems) {
    if (s.nqn == kSub2) sub2 = &s;
  }
  ASSERT_NE(sub2, nullptr);
  ASSERT_EQ(sub2->tls_psk_hosts.size(), 1u);
  EXPECT_EQ(sub2->tls_psk_hosts[0].nqn, kHost1);
  EXPECT_EQ(sub2->tls_psk_hosts[0].tls_psk, "file /etc/rdmablk/keys/host1.psk");
  const std::string text = subsystems_json(status).dump();
  EXPECT_NE(text.find("\"tls_psk\":\"file /etc/rdmablk/keys/host1.psk\""), std::string::npos) << text;
  EXPECT_EQ(text.find("NVMeTLSkey"), std::string::npos) << text;
  EXPECT_EQ(text.find(text_key.substr(16, 20)), std::string::npos) << text;
}

}  // namespace
}  // namespace rdmablk::target::testing
