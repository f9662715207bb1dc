// Log pages and the discovery log (NVMe Base 2.0 5.16.1; NVMe over Fabrics 1.1 5.3).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "protocol/command.h"
#include "protocol/log_pages.h"
#include "protocol/status.h"

namespace rdmablk::protocol {
namespace {

template <typename T>
std::vector<uint8_t> bytes_of(const T& v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

std::string_view chars_at(const std::vector<uint8_t>& b, std::size_t off, std::size_t n) {
  return {reinterpret_cast<const char*>(&b[off]), n};
}

constexpr std::string_view kSubNqn = "nqn.2014-08.io.rdmablk:vol1";

DiscoveryLogEntry base_entry(TransportType t, std::string_view traddr, std::string_view trsvcid) {
  DiscoveryLogEntry e{};
  e.trtype = static_cast<uint8_t>(t);
  e.adrfam = static_cast<uint8_t>(AddressFamily::ipv4);
  e.subtype = static_cast<uint8_t>(SubsystemType::nvme);
  e.treq = treq::kSecureNotSpecified;
  e.portid.set(1);
  e.cntlid.set(0xFFFF);
  e.asqsz.set(32);
  set_padded(e.trsvcid, trsvcid.data(), trsvcid.size(), ' ');
  set_padded(e.subnqn, kSubNqn.data(), kSubNqn.size(), '\0');
  set_padded(e.traddr, traddr.data(), traddr.size(), ' ');
  return e;
}

void expect_common_entry_bytes(const std::vector<uint8_t>& b, uint8_t trtype) {
  ASSERT_EQ(b.size(), 1024u);
  EXPECT_EQ(b[0], trtype);
  EXPECT_EQ(b[1], 1);     // ADRFAM IPv4
  EXPECT_EQ(b[2], 2);     // SUBTYPE NVMe
  EXPECT_EQ(b[3], 0);     // TREQ
  EXPECT_EQ(b[4], 1);     // PORTID
  EXPECT_EQ(b[5], 0);
  EXPECT_EQ(b[6], 0xFF);  // CNTLID dynamic
  EXPECT_EQ(b[7], 0xFF);
  EXPECT_EQ(b[8], 32);    // ASQSZ
  EXPECT_EQ(b[9], 0);
  for (std::size_t i = 10; i < 32; ++i) EXPECT_EQ(b[i], 0) << i;  // EFLAGS + reserved
  EXPECT_EQ(chars_at(b, 32, 32), "4420                            ");
  for (std::size_t i = 64; i < 256; ++i) EXPECT_EQ(b[i], 0) << i;
  EXPECT_EQ(chars_at(b, 256, kSubNqn.size()), kSubNqn);
  EXPECT_EQ(b[256 + kSubNqn.size()], 0);
  EXPECT_EQ(chars_at(b, 512, 12), "192.168.1.10");
  EXPECT_EQ(b[512 + 12], ' ');
  EXPECT_EQ(b[767], ' ');
}

TEST(DiscoveryLog, TcpEntryGoldenBytes) {
  auto e = base_entry(TransportType::tcp, "192.168.1.10", "4420");
  TcpTsas tsas{};
  tsas.sectype = static_cast<uint8_t>(TcpSecType::none);
  e.set_tsas(tsas);
  const auto b = bytes_of(e);
  expect_common_entry_bytes(b, 3);
  for (std::size_t i = 768; i < 1024; ++i) EXPECT_EQ(b[i], 0) << i;
  EXPECT_EQ(e.tcp_tsas().sectype, 0);
}

TEST(DiscoveryLog, RdmaEntryGoldenBytes) {
  auto e = base_entry(TransportType::rdma, "192.168.1.10", "4420");
  RdmaTsas tsas{};
  tsas.qptype = static_cast<uint8_t>(RdmaQpType::reliable_connected);
  tsas.prtype = static_cast<uint8_t>(RdmaProviderType::not_specified);
  tsas.cms = static_cast<uint8_t>(RdmaCms::rdma_cm);
  tsas.pkey.set(0xFFFF);
  e.set_tsas(tsas);
  const auto b = bytes_of(e);
  expect_common_entry_bytes(b, 1);
  EXPECT_EQ(b[768], 1);  // RDMA_QPTYPE RC
  EXPECT_EQ(b[769], 1);  // RDMA_PRTYPE not specified
  EXPECT_EQ(b[770], 1);  // RDMA_CMS RDMA_CM
  for (std::size_t i = 771; i < 776; ++i) EXPECT_EQ(b[i], 0) << i;
  EXPECT_EQ(b[776], 0xFF);  // RDMA_PKEY at TSAS byte 8
  EXPECT_EQ(b[777], 0xFF);
  EXPECT_EQ(b[778], 0);
  const auto back = load<DiscoveryLogEntry>(b.data()).rdma_tsas();
  EXPECT_EQ(back.qptype, 1);
  EXPECT_EQ(back.pkey.get(), 0xFFFF);
}

TEST(DiscoveryLog, EnumValuesMatchSpec) {
  EXPECT_EQ(static_cast<int>(TransportType::rdma), 1);
  EXPECT_EQ(static_cast<int>(TransportType::fc), 2);
  EXPECT_EQ(static_cast<int>(TransportType::tcp), 3);
  EXPECT_EQ(static_cast<int>(TransportType::loop), 254);
  EXPECT_EQ(static_cast<int>(AddressFamily::ipv6), 2);
  EXPECT_EQ(static_cast<int>(AddressFamily::ib), 3);
  EXPECT_EQ(static_cast<int>(AddressFamily::fc), 4);
  EXPECT_EQ(static_cast<int>(SubsystemType::discovery_referral), 1);
  EXPECT_EQ(static_cast<int>(SubsystemType::current_discovery), 3);
  EXPECT_EQ(static_cast<int>(RdmaProviderType::roce_v2), 4);
  EXPECT_EQ(static_cast<int>(TcpSecType::tls13), 2);
}

TEST(DiscoveryLog, HeaderGoldenBytesAndEntryFlags) {
  DiscoveryLogHeader h{};
  h.genctr.set(0x0102030405060708ull);
  h.numrec.set(2);
  h.recfmt.set(0);
  const auto b = bytes_of(h);
  ASSERT_EQ(b.size(), 1024u);
  const std::vector<uint8_t> head(b.begin(), b.begin() + 18);
  EXPECT_EQ(head, (std::vector<uint8_t>{8, 7, 6, 5, 4, 3, 2, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0}));

  DiscoveryLogEntry e{};
  e.eflags.set(eflags::kExplicitPersistentConnection | eflags::kNoCdcConnectivity);
  e.treq = treq::kSecureNotRequired | treq::kDisableSqFlowSupported;
  const auto eb = bytes_of(e);
  EXPECT_EQ(eb[3], 0x06);
  EXPECT_EQ(eb[10], 0x05);
  EXPECT_EQ(eb[11], 0x00);
}

TEST(DiscoveryLog, PageIsHeaderThenEntriesAtLpo) {
  // A host reading entry 1 asks for LPO 1024 + 1024; check the layout arithmetic the target relies on.
  std::vector<uint8_t> page(sizeof(DiscoveryLogHeader) + 2 * sizeof(DiscoveryLogEntry));
  DiscoveryLogHeader h{};
  h.numrec.set(2);
  store(page.data(), h);
  store(page.data() + 1024, base_entry(TransportType::tcp, "192.168.1.10", "4420"));
  store(page.data() + 2048, base_entry(TransportType::rdma, "192.168.1.10", "4420"));
  const auto cmd = make_get_log_page(1, LogPageId::discovery, 0, 2048, 1024, SglDescriptor{});
  ASSERT_LE(cmd.offset() + cmd.length_bytes(), page.size());
  const auto second = load<DiscoveryLogEntry>(page.data() + cmd.offset());
  EXPECT_EQ(second.trtype, 1);
}

TEST(LogPages, ErrorLogEntryGolden) {
  ErrorLogEntry e{};
  e.error_count.set(1);
  e.sqid.set(2);
  e.cid.set(0x1234);
  e.status.set(status::lba_out_of_range.cqe_status(true));
  e.parameter_error_location.set(0xFFFF);
  e.lba.set(0xABCDEF);
  e.nsid.set(1);
  e.trtype = static_cast<uint8_t>(TransportType::tcp);
  e.opcode = 0x02;
  e.log_page_version = 1;
  const auto b = bytes_of(e);
  EXPECT_EQ(b[0], 1);
  EXPECT_EQ(b[8], 2);
  EXPECT_EQ(b[10], 0x34);
  EXPECT_EQ(b[12], 0x01);  // phase
  EXPECT_EQ(b[13], 0x81);
  EXPECT_EQ(b[14], 0xFF);
  EXPECT_EQ(b[16], 0xEF);
  EXPECT_EQ(b[24], 1);
  EXPECT_EQ(b[29], 3);
  EXPECT_EQ(b[31], 0x02);
  EXPECT_EQ(b[63], 1);
}

TEST(LogPages, SmartCountersAre128Bit) {
  SmartLog s{};
  s.critical_warning = smart::kWarnSpare | smart::kWarnReadOnly;
  s.composite_temperature.set(310);  // kelvin, unaligned at byte 1
  s.available_spare = 100;
  s.available_spare_threshold = 10;
  s.percentage_used = 3;
  s.data_units_read.set(~0ull);
  s.data_units_read.add(2);  // carries into the high half
  s.data_units_written.set(5);
  s.host_read_commands.set(6);
  s.host_write_commands.set(7);
  s.power_on_hours.set(8);
  s.unsafe_shutdowns.set(9);
  s.media_errors.set(10);
  s.temp_sensor[0].set(300);
  const auto b = bytes_of(s);
  ASSERT_EQ(b.size(), 512u);
  EXPECT_EQ(b[0], 0x09);
  EXPECT_EQ(b[1], 0x36);  // 310 = 0x0136
  EXPECT_EQ(b[2], 0x01);
  EXPECT_EQ(b[3], 100);
  EXPECT_EQ(b[4], 10);
  EXPECT_EQ(b[5], 3);
  EXPECT_EQ(b[32], 1);  // low half wrapped to 1
  EXPECT_EQ(b[40], 1);  // high half got the carry
  EXPECT_EQ(b[48], 5);
  EXPECT_EQ(b[64], 6);
  EXPECT_EQ(b[80], 7);
  EXPECT_EQ(b[128], 8);
  EXPECT_EQ(b[144], 9);
  EXPECT_EQ(b[160], 10);
  EXPECT_EQ(b[200], 0x2C);  // 300 = 0x012C
  EXPECT_EQ(b[201], 0x01);
  EXPECT_EQ(s.data_units_read.high(), 1u);
  EXPECT_EQ(s.data_units_read.low(), 1u);
  EXPECT_EQ(smart_data_units(0), 0u);
  EXPECT_EQ(smart_data_units(512), 1u);
  EXPECT_EQ(smart_data_units(512 * 1000), 1u);
  EXPECT_EQ(smart_data_units(512 * 1001), 2u);
}

TEST(LogPages, FirmwareSlotLayout) {
  FirmwareSlotLog fw{};
  fw.afi = 0x01;
  set_padded(fw.frs[0], "0.1.0", 5, ' ');
  set_padded(fw.frs[6], "slot7", 5, ' ');
  const auto b = bytes_of(fw);
  EXPECT_EQ(b[0], 1);
  EXPECT_EQ(chars_at(b, 8, 8), "0.1.0   ");
  EXPECT_EQ(chars_at(b, 56, 8), "slot7   ");
  EXPECT_EQ(b[64], 0);
}

TEST(LogPages, CommandEffectsIndexedByOpcode) {
  auto log = std::make_unique<CommandEffectsLog>();
  *log = {};
  log->acs[static_cast<uint8_t>(AdminOpcode::identify)].set(effects::kCsupp);
  log->iocs[static_cast<uint8_t>(IoOpcode::write)].set(effects::kCsupp | effects::kLbcc);
  const auto b = bytes_of(*log);
  EXPECT_EQ(b[0x06 * 4], 0x01);
  EXPECT_EQ(b[1024 + 0x01 * 4], 0x03);
  EXPECT_EQ(b[1024 + 0x02 * 4], 0x00);
}

TEST(LogPages, ChangedNamespaceList) {
  ChangedNamespaceList l{};
  l.nsid[0].set(kChangedNsOverflow);
  l.nsid[1].set(7);
  const auto b = bytes_of(l);
  EXPECT_EQ(b.size(), 4096u);
  EXPECT_EQ(b[0], 0xFF);
  EXPECT_EQ(b[3], 0xFF);
  EXPECT_EQ(b[4], 7);
}

}  // namespace
}  // namespace rdmablk::protocol
