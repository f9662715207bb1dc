// Fabrics commands, Connect data and NQN validation (NVMe over Fabrics 1.1, 3; NVMe Base 2.0, 4.5).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "protocol/command.h"
#include "protocol/fabrics.h"

namespace rdmablk::protocol {
namespace {

template <typename T>
std::vector<uint8_t> bytes_of(const T& v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

constexpr std::string_view kSubNqn = "nqn.2014-08.io.rdmablk:vol1";
constexpr std::string_view kHostNqn = "nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100";

std::array<uint8_t, 16> test_hostid() {
  std::array<uint8_t, 16> id{};
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(i);
  return id;
}

TEST(Fabrics, ConnectCommandGoldenBytes) {
  const auto cmd = make_connect(0x0007, 0, 31, 120000, kConnectDisableSqFlow, make_keyed_sgl(0x1000, 1024, 0x12345678));
  std::vector<uint8_t> want(64, 0);
  want[0] = 0x7F;                                      // fabrics opcode
  want[1] = 0x40;                                      // PSDT SGL
  want[2] = 0x07;                                      // CID
  want[4] = 0x01;                                      // FCTYPE Connect
  want[25] = 0x10;                                     // SGL address 0x1000
  want[33] = 0x04;                                     // SGL length 1024 (24 bits at byte 8)
  want[35] = 0x78, want[36] = 0x56, want[37] = 0x34, want[38] = 0x12;  // key
  want[39] = 0x40;
  // RECFMT 0 at 40, QID 0 at 42
  want[44] = 0x1F;                                     // SQSIZE 31 (0-based: 32 entries)
  want[46] = 0x04;                                     // CATTR: SQ flow control disabled
  want[48] = 0xC0, want[49] = 0xD4, want[50] = 0x01;   // KATO 120000 ms
  EXPECT_EQ(bytes_of(cmd), want);
  EXPECT_EQ(cmd.queue_entries(), 32u);
  EXPECT_TRUE(cmd.sq_flow_control_disabled());
  EXPECT_EQ(as<FabricsCommand>(to_sqe(cmd)).type(), FabricsType::connect);
}

TEST(Fabrics, ConnectDataGoldenBytes) {
  const auto data = make_connect_data(test_hostid(), kCntlidDynamic, kSubNqn, kHostNqn);
  const auto b = bytes_of(data);
  ASSERT_EQ(b.size(), 1024u);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(b[i], i);
  EXPECT_EQ(b[16], 0xFF);
  EXPECT_EQ(b[17], 0xFF);
  for (std::size_t i = 18; i < 256; ++i) ASSERT_EQ(b[i], 0) << i;
  EXPECT_EQ(0, std::memcmp(&b[256], kSubNqn.data(), kSubNqn.size()));
  for (std::size_t i = 256 + kSubNqn.size(); i < 512; ++i) ASSERT_EQ(b[i], 0) << i;
  EXPECT_EQ(0, std::memcmp(&b[512], kHostNqn.data(), kHostNqn.size()));
  for (std::size_t i = 512 + kHostNqn.size(); i < 1024; ++i) ASSERT_EQ(b[i], 0) << i;
}

TEST(Fabrics, DecodeConnectDataRoundTrip) {
  const auto b = bytes_of(make_connect_data(test_hostid(), 0x0005, kSubNqn, kHostNqn));
  const auto v = decode_connect_data(b);
  ASSERT_TRUE(v.has_value()) << v.error().what;
  EXPECT_EQ(v->hostid, test_hostid());
  EXPECT_EQ(v->cntlid, 5);
  EXPECT_EQ(v->subnqn, kSubNqn);
  EXPECT_EQ(v->hostnqn, kHostNqn);
  EXPECT_EQ(v->subnqn.data(), reinterpret_cast<const char*>(b.data() + 256));  // views into the buffer
}

TEST(Fabrics, ConnectDataRejectsShortBuffer) {
  std::vector<uint8_t> b(1000, 0);
  const auto v = decode_connect_data(b);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 1000u);
}

TEST(Fabrics, ConnectDataRejectsSubnqnWithoutNul) {
  auto b = bytes_of(make_connect_data(test_hostid(), kCntlidDynamic, kSubNqn, kHostNqn));
  std::memset(&b[256], 'a', 256);
  const auto v = decode_connect_data(b);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 256u);
}

TEST(Fabrics, ConnectDataRejectsHostnqnWithoutNul) {
  auto b = bytes_of(make_connect_data(test_hostid(), kCntlidDynamic, kSubNqn, kHostNqn));
  std::memset(&b[512], 'h', 256);
  const auto v = decode_connect_data(b);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 512u);
}

TEST(Fabrics, ConnectDataRejectsEmptyHostnqn) {
  const auto b = bytes_of(make_connect_data(test_hostid(), kCntlidDynamic, kSubNqn, ""));
  const auto v = decode_connect_data(b);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 512u);
}

TEST(Fabrics, ConnectDataReportsOffsetOfBadNqnByte) {
  // Month 13 at index 9 of the subsystem NQN -> 256 + 9.
  auto v = decode_connect_data(bytes_of(make_connect_data(test_hostid(), 1, "nqn.2014-13.io.x", kHostNqn)));
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 265u);
  // A '_' at index 14 of the host NQN -> 512 + 14.
  v = decode_connect_data(bytes_of(make_connect_data(test_hostid(), 1, kSubNqn, "nqn.2014-08.io_x")));
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 526u);
}

TEST(Fabrics, ConnectResponseDw0) {
  EXPECT_EQ(connect_success_result(0x0012), 0x00000012u);
  EXPECT_EQ(connect_success_result(0x0012, 0x1), 0x00010012u);
  EXPECT_EQ(connect_result_cntlid(0xABCD0012u), 0x0012);
  // Invalid SUBNQN in the data: IATTR bit 0 = 1, IPO = 256.
  EXPECT_EQ(connect_invalid_param_result(true, 256), 0x01000001u);
  // Invalid QID in the command: IATTR 0, IPO = 42.
  EXPECT_EQ(connect_invalid_param_result(false, 42), 0x002A0000u);
}

TEST(Fabrics, PropertyGetSetAndDisconnectGoldenBytes) {
  const auto get_cap = make_property_get(0x21, 0x00, /*eight_bytes=*/true);
  std::vector<uint8_t> want(64, 0);
  want[0] = 0x7F, want[1] = 0x40, want[2] = 0x21, want[4] = 0x04;
  want[40] = 0x01;  // ATTRIB size 8
  EXPECT_EQ(bytes_of(get_cap), want);
  EXPECT_TRUE(get_cap.is_8byte());

  const auto set_cc = make_property_set(0x22, 0x14, 0x00460001, /*eight_bytes=*/false);
  want.assign(64, 0);
  want[0] = 0x7F, want[1] = 0x40, want[2] = 0x22, want[4] = 0x00;
  want[44] = 0x14;                                                  // OFFSET CC
  want[48] = 0x01, want[49] = 0x00, want[50] = 0x46, want[51] = 0x00;  // VALUE
  EXPECT_EQ(bytes_of(set_cc), want);
  EXPECT_FALSE(set_cc.is_8byte());
  EXPECT_EQ(set_cc.offset.get(), 0x14u);

  const auto disc = make_disconnect(0x30);
  want.assign(64, 0);
  want[0] = 0x7F, want[1] = 0x40, want[2] = 0x30, want[4] = 0x08;
  EXPECT_EQ(bytes_of(disc), want);
  EXPECT_EQ(disc.recfmt.get(), 0);
}

TEST(Fabrics, FabricsTypeValues) {
  EXPECT_EQ(static_cast<int>(FabricsType::property_set), 0x00);
  EXPECT_EQ(static_cast<int>(FabricsType::connect), 0x01);
  EXPECT_EQ(static_cast<int>(FabricsType::property_get), 0x04);
  EXPECT_EQ(static_cast<int>(FabricsType::authentication_send), 0x05);
  EXPECT_EQ(static_cast<int>(FabricsType::authentication_receive), 0x06);
  EXPECT_EQ(static_cast<int>(FabricsType::disconnect), 0x08);
}

TEST(Nqn, AcceptsTheThreeForms) {
  EXPECT_EQ(decode_nqn(kDiscoveryNqn).value(), NqnForm::discovery);
  EXPECT_EQ(decode_nqn(kHostNqn).value(), NqnForm::uuid);
  EXPECT_EQ(decode_nqn("nqn.2014-08.org.nvmexpress:uuid:0F0E0D0C-0B0A-0908-0706-050403020100").value(), NqnForm::uuid);
  EXPECT_EQ(decode_nqn(kSubNqn).value(), NqnForm::domain);
  EXPECT_EQ(decode_nqn("nqn.2016-06.io.spdk:cnode1").value(), NqnForm::domain);
  EXPECT_EQ(decode_nqn("nqn.1992-01.com.example").value(), NqnForm::domain);
  EXPECT_EQ(decode_nqn("nqn.2014-08.com.example:nvme:nvm-subsystem-sn-d78432").value(), NqnForm::domain);
  EXPECT_TRUE(valid_nqn("nqn.2019-10.com.example:ümlaut"));  // UTF-8 user string
}

TEST(Nqn, LengthLimitIs223Bytes) {
  std::string nqn = "nqn.2014-08.com.example:";
  nqn.append(kNqnMaxLength - nqn.size(), 'x');
  EXPECT_EQ(nqn.size(), 223u);
  EXPECT_TRUE(valid_nqn(nqn));
  nqn.push_back('x');
  const auto v = decode_nqn(nqn);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 223u);
}

struct BadNqn {
  std::string_view nqn;
  uint32_t offset;
};
class NqnRejects : public ::testing::TestWithParam<BadNqn> {};

TEST_P(NqnRejects, AtTheOffendingByte) {
  const auto v = decode_nqn(GetParam().nqn);
  ASSERT_FALSE(v.has_value()) << GetParam().nqn;
  EXPECT_EQ(v.error().offset, GetParam().offset) << GetParam().nqn << ": " << v.error().what;
  EXPECT_FALSE(valid_nqn(GetParam().nqn));
}
INSTANTIATE_TEST_SUITE_P(
    Malformed, NqnRejects,
    ::testing::Values(BadNqn{"", 0}, BadNqn{"nqx.2014-08.com.example", 2}, BadNqn{"nqn", 3},
                      BadNqn{"NQN.2014-08.com.example", 0}, BadNqn{"nqn.14-08.com.example", 6},
                      BadNqn{"nqn.2014/08.com.example", 8}, BadNqn{"nqn.2014-00.com.example", 9},
                      BadNqn{"nqn.2014-13.com.example", 9}, BadNqn{"nqn.2014-08", 11},
                      BadNqn{"nqn.2014-08com.example", 11}, BadNqn{"nqn.2014-08.", 12},
                      BadNqn{"nqn.2014-08..com", 12}, BadNqn{"nqn.2014-08.com..example", 16},
                      BadNqn{"nqn.2014-08.com.", 16}, BadNqn{"nqn.2014-08.com.ex ample", 18},
                      BadNqn{"nqn.2014-08.com.example:", 24}, BadNqn{"nqn.2014-08.com.example:a\tb", 25},
                      BadNqn{"nqn.2014-08.org.nvmexpress:uuid:", 32},
                      BadNqn{"nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-05040302010", 67},
                      BadNqn{"nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100x", 68},
                      BadNqn{"nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c_0b0a-0908-0706-050403020100", 40},
                      BadNqn{"nqn.2014-08.org.nvmexpress:uuid:0f0e0d0g-0b0a-0908-0706-050403020100", 39}));

TEST(Nqn, FieldNeedsNulWithin256Bytes) {
  std::array<char, kNqnFieldSize> field{};
  set_padded(field, kSubNqn.data(), kSubNqn.size(), '\0');
  auto v = nqn_field(field, 768);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, kSubNqn);
  field.fill('n');
  v = nqn_field(field, 768);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 768u);
}

}  // namespace
}  // namespace rdmablk::protocol
