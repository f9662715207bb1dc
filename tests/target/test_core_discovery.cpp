// Target core: the discovery controller and its log page.
#include "target/core_test_util.h"

namespace rdmablk::target::testing {
namespace {

struct DiscoveryLog {
  p::DiscoveryLogHeader hdr{};
  std::vector<p::DiscoveryLogEntry> entries;
};

DiscoveryLog parse_log(const std::vector<uint8_t>& page) {
  DiscoveryLog log;
  log.hdr = from_bytes<p::DiscoveryLogHeader>(page);
  for (uint64_t i = 0; i < log.hdr.numrec.get(); ++i)
    log.entries.push_back(from_bytes<p::DiscoveryLogEntry>(page, 1024 + i * 1024));
  return log;
}

std::string str(const auto& field) { return std::string(field.data(), strnlen(field.data(), field.size())); }

// Reads the whole log the way nvme-cli does: the header first, then everything, in 512-byte chunks.
std::vector<uint8_t> read_log_in_chunks(CoreHarness& h, FakeTargetQueue& q) {
  auto first = h.get_log(q, p::LogPageId::discovery, 0, 512);
  EXPECT_TRUE(first.status().ok());
  const auto numrec = from_bytes<p::le64>(first.data, 8).get();
  const uint64_t total = 1024 + numrec * 1024;
  std::vector<uint8_t> out;
  for (uint64_t off = 0; off < total; off += 512) {
    auto c = h.get_log(q, p::LogPageId::discovery, off, 512);
    EXPECT_TRUE(c.status().ok()) << "offset " << off;
    out.insert(out.end(), c.data.begin(), c.data.end());
  }
  return out;
}

TEST(CoreDiscovery, IdentifyController) {
  CoreHarness h;
  auto q = h.queue(transport::TransportType::tcp, "10.0.0.1", 8009);
  const uint16_t cntlid = h.bring_up(*q, p::kDiscoveryNqn, kHost2);
  const auto id = from_bytes<p::IdentifyController>(h.identify(*q, p::Cns::controller, 0).data);
  EXPECT_EQ(id.cntrltype, p::idctl::kCntrltypeDiscovery);
  EXPECT_EQ(id.cntlid.get(), cntlid);
  EXPECT_EQ(id.nn.get(), 0u);
  EXPECT_EQ(id.oaes.get(), p::idctl::kOaesDiscoveryLogChange);
  EXPECT_EQ(id.kas.get(), 10);
  EXPECT_EQ(str(id.subnqn), p::kDiscoveryNqn);
}

TEST(CoreDiscovery, LogListsOnlyPermittedSubsystemsWithTheRealAddress) {
  CoreHarness h;
  // host1 may see both subsystems, host2 only the open one.
  for (auto [host, expect_sub2] : {std::pair{kHost1, true}, std::pair{kHost2, false}}) {
    auto q = h.queue(transport::TransportType::tcp, "10.0.0.1", 8009);
    h.bring_up(*q, p::kDiscoveryNqn, host);
    auto c = h.get_log(*q, p::LogPageId::discovery, 0, 4096);
    ASSERT_TRUE(c.status().ok());
    const auto log = parse_log(c.data);
    EXPECT_EQ(log.hdr.recfmt.get(), 0);
    ASSERT_EQ(log.hdr.numrec.get(), expect_sub2 ? 3u : 2u);
    // First: the discovery subsystem this host is talking to (the 8009 listener).
    const auto& cur = log.entries[0];
    EXPECT_EQ(cur.subtype, static_cast<uint8_t>(p::SubsystemType::current_discovery));
    EXPECT_EQ(str(cur.subnqn), p::kDiscoveryNqn);
    EXPECT_EQ(str(cur.trsvcid), "8009");
    EXPECT_EQ(cur.portid.get(), 2);
    // Then the subsystems on the 0.0.0.0:4420 listener, reported with the address the host came in on.
    std::vector<std::string> nqns;
    for (std::size_t i = 1; i < log.entries.size(); ++i) {
      const auto& e = log.entries[i];
      nqns.push_back(str(e.subnqn));
      EXPECT_EQ(e.trtype, static_cast<uint8_t>(p::TransportType::tcp));
      EXPECT_EQ(e.adrfam, static_cast<uint8_t>(p::AddressFamily::ipv4));
      EXPECT_EQ(e.subtype, static_cast<uint8_t>(p::SubsystemType::nvme));
      EXPECT_EQ(str(e.traddr), "10.0.0.1");
      EXPECT_EQ(str(e.trsvcid), "4420");
      EXPECT_EQ(e.portid.get(), 1);
      EXPECT_EQ(e.cntlid.get(), 0xFFFF);
      EXPECT_EQ(e.asqsz.get(), 32);
      EXPECT_EQ(e.treq & p::treq::kSecureMask, 0);
      EXPECT_EQ(e.tcp_tsas().sectype, 0);
    }
    EXPECT_EQ(std::count(nqns.begin(), nqns.end(), std::string(kSub1)), 1);
    EXPECT_EQ(std::count(nqns.begin(), nqns.end(), std::string(kSub2)), expect_sub2 ? 1 : 0);
  }
}

TEST(CoreDiscovery, NeverAWildcardAddress) {
  CoreHarness h;
  // A dual-stack socket reports an IPv4 peer's local address as ::ffff:a.b.c.d.
  auto q = h.queue(transport::TransportType::tcp, "::ffff:192.168.7.9", 4420);
  h.bring_up(*q, p::kDiscoveryNqn, kHost1);
  const auto log = parse_log(h.get_log(*q, p::LogPageId::discovery, 0, 4096).data);
  ASSERT_EQ(log.entries.size(), 3u);
  for (const auto& e : log.entries) {
    EXPECT_EQ(str(e.traddr), "192.168.7.9");
    EXPECT_EQ(e.adrfam, static_cast<uint8_t>(p::AddressFamily::ipv4));
  }
  EXPECT_EQ(log.entries[0].portid.get(), 1);  // came in on the 0.0.0.0:4420 listener
}

TEST(CoreDiscovery, RdmaEntriesCarryRdmaTsas) {
  auto config = test_config();
  config.listeners[0].transport = transport::TransportType::rdma;
  config.listeners[0].address = "192.168.1.5";
  CoreHarness h(config);
  auto q = h.queue(transport::TransportType::tcp, "10.0.0.1", 8009);
  h.bring_up(*q, p::kDiscoveryNqn, kHost2);
  const auto log = parse_log(h.get_log(*q, p::LogPageId::discovery, 0, 3072).data);
  ASSERT_EQ(log.entries.size(), 2u);
  const auto& e = log.entries[1];
  EXPECT_EQ(e.trtype, static_cast<uint8_t>(p::TransportType::rdma));
  EXPECT_EQ(str(e.traddr), "192.168.1.5");
  const auto tsas = e.rdma_tsas();
  EXPECT_EQ(tsas.qptype, static_cast<uint8_t>(p::RdmaQpType::reliable_connected));
  EXPECT_EQ(tsas.prtype, static_cast<uint8_t>(p::RdmaProviderType::not_specified));
  EXPECT_EQ(tsas.cms, static_cast<uint8_t>(p::RdmaCms::rdma_cm));
}

TEST(CoreDiscovery, ChunkedReadsReassembleTheSamePage) {
  CoreHarness h;
  auto q = h.queue(transport::TransportType::tcp, "10.0.0.1", 8009);
  h.bring_up(*q, p::kDiscoveryNqn, kHost1);
  auto whole = h.get_log(*q, p::LogPageId::discovery, 0, 4096);
  ASSERT_TRUE(whole.status().ok());
  auto chunks = read_log_in_chunks(h, *q);
  ASSERT_EQ(chunks.size(), 4096u);
  EXPECT_EQ(chunks, whole.data);
  EXPECT_EQ(from_bytes<p::le64>(chunks, 0).get(), h.core().discovery_generation());
  // Past the end of the page: invalid field; not dword aligned: invalid field.
  EXPECT_EQ(h.get_log(*q, p::LogPageId::discovery, 8192, 512).status(), st::invalid_field);
  EXPECT_EQ(h.get_log(*q, p::LogPageId::discovery, 6, 512).status(), st::invalid_field);
}

TEST(CoreDiscovery, OnlyDiscoveryCommandsAreAccepted) {
  CoreHarness h;
  auto q = h.queue(transport::TransportType::tcp, "10.0.0.1", 8009);
  h.bring_up(*q, p::kDiscoveryNqn, kHost1);
  EXPECT_EQ(h.run(*q, sqe_of(p::make_abort(h.next_cid(), 0, 1))).status(), st::invalid_opcode);
  p::Sqe fmt{};
  fmt.hdr = p::make_header(static_cast<uint8_t>(p::AdminOpcode::format_nvm), h.next_cid(), 1);
  EXPECT_EQ(h.run(*q, fmt).status(), st::invalid_opcode);
  EXPECT_EQ(h.identify(*q, p::Cns::namespace_, 1).status(), st::invalid_field);
  EXPECT_EQ(h.identify(*q, p::Cns::active_namespace_list, 0).status(), st::invalid_field);
  EXPECT_EQ(h.get_log(*q, p::LogPageId::smart_health, 0, 512).status(), st::invalid_field);
  EXPECT_EQ(h.set_feature(*q, p::FeatureId::number_of_queues, 0).status(), st::invalid_field);
  // Keep alive, KATO, AEC, AER work.
  EXPECT_TRUE(h.run(*q, p::make_keep_alive(h.next_cid())).status().ok());
  EXPECT_EQ(h.get_feature(*q, p::FeatureId::keep_alive_timer).dw0(), 120000u);  // KATO 0 -> nvmet's default
  EXPECT_TRUE(h.set_feature(*q, p::FeatureId::async_event_configuration, p::kAecDiscoveryLogChange).status().ok());
  EXPECT_EQ(h.set_feature(*q, p::FeatureId::async_event_configuration, p::kAecNamespaceAttribute).status(),
            st::invalid_field);
}

TEST(CoreDiscovery, ReloadBumpsGenctrAndSendsTheDiscoveryChangeEvent) {
  CoreHarness h;
  auto q = h.queue(transport::TransportType::tcp, "10.0.0.1", 8009);
  h.bring_up(*q, p::kDiscoveryNqn, kHost2);
  ASSERT_TRUE(h.set_feature(*q, p::FeatureId::async_event_configuration, p::kAecDiscoveryLogChange).status().ok());
  const uint16_t aer = h.post_aer(*q);
  const auto before = parse_log(h.get_log(*q, p::LogPageId::discovery, 0, 4096).data);
  EXPECT_EQ(before.entries.size(), 2u);

  auto config = test_config();
  config.subsystems[1].hosts.push_back(kHost2);  // host2 may now see sub2
  auto r = h.core().reload(config);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->discovery_changed);
  h.reactor.run();
  auto ev = q->result(aer);
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->dw0(), p::async_event_result(p::AsyncEventType::notice, 0xF0, 0x70));
  const auto after = parse_log(h.get_log(*q, p::LogPageId::discovery, 0, 4096).data);
  EXPECT_EQ(after.hdr.genctr.get(), before.hdr.genctr.get() + 1);
  EXPECT_EQ(after.entries.size(), 3u);
}

// A gateway group member lists the other members' io listeners too (port IDs from 0x4000), for the
// subsystems the host may see; a change is a new generation and the Discovery Log Change event.
TEST(CoreDiscovery, TheOtherGroupMembersListenersAreListed) {
  CoreHarness h;
  auto q = h.queue(transport::TransportType::tcp, "10.0.0.1", 8009);
  h.bring_up(*q, p::kDiscoveryNqn, kHost2);  // may see sub1 only
  ASSERT_TRUE(h.set_feature(*q, p::FeatureId::async_event_configuration, p::kAecDiscoveryLogChange).status().ok());
  const uint16_t aer = h.post_aer(*q);
  const auto before = parse_log(h.get_log(*q, p::LogPageId::discovery, 0, 8192).data);

  PeerListener b;
  b.address = "10.0.0.2";
  b.port = 4420;
  PeerListener wildcard;
  wildcard.address = "0.0.0.0";
  wildcard.port = 4421;
  PeerListener tls = b;
  tls.address = "10.0.0.3";
  tls.tls = transport::tcp::TlsPolicy::required;
  EXPECT_TRUE(h.core().set_peer_listeners({b, wildcard, tls}));
  EXPECT_FALSE(h.core().set_peer_listeners({b, wildcard, tls})) << "the same peers: no change";
  h.reactor.run();
  auto ev = q->result(aer);
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->dw0(), p::async_event_result(p::AsyncEventType::notice, 0xF0, 0x70));

  const auto after = parse_log(h.get_log(*q, p::LogPageId::discovery, 0, 8192).data);
  EXPECT_EQ(after.hdr.genctr.get(), before.hdr.genctr.get() + 1);
  ASSERT_EQ(after.entries.size(), before.entries.size() + 2) << "one entry per peer listener, never a wildcard";
  const auto& eb = after.entries[before.entries.size()];
  EXPECT_EQ(str(eb.traddr), "10.0.0.2");
  EXPECT_EQ(str(eb.trsvcid), "4420");
  EXPECT_EQ(str(eb.subnqn), kSub1);
  EXPECT_EQ(eb.portid.get(), 0x4000);
  const auto& et = after.entries[before.entries.size() + 1];
  EXPECT_EQ(str(et.traddr), "10.0.0.3");
  EXPECT_EQ(et.portid.get(), 0x4002);
  EXPECT_NE(et.treq & p::treq::kSecureMask, 0) << "TREQ says TLS is required there";

  EXPECT_TRUE(h.core().set_peer_listeners({}));
  EXPECT_EQ(parse_log(h.get_log(*q, p::LogPageId::discovery, 0, 8192).data).entries.size(), before.entries.size());
}

}  // namespace
}  // namespace rdmablk::target::testing
