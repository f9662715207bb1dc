// Asymmetric Namespace Access wire formats (NVMe Base 2.0 5.16.1.13, 8.20).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/ana.h"
#include "protocol/command.h"

namespace rdmablk::protocol {
namespace {

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<AnaGroupEntry> two_groups() {
  return {AnaGroupEntry{1, AnaState::optimized, 5, {1, 3}}, AnaGroupEntry{2, AnaState::inaccessible, 5, {2}}};
}

// Expected bytes computed independently with python3's struct module from the spec's layout (Figures 226/227):
//   struct.pack('<QH6x', 0x0102030405060708, 2)
//   + struct.pack('<IIQB15x', 1, 2, 5, 1) + struct.pack('<II', 1, 3)
//   + struct.pack('<IIQB15x', 2, 1, 5, 3) + struct.pack('<I', 2)
TEST(AnaLog, GoldenBytesWithNsidLists) {
  const auto groups = two_groups();
  const auto log = make_ana_log(0x0102030405060708ull, groups, false);
  EXPECT_EQ(log, from_hex("0807060504030201020000000000000001000000020000000500000000000000010000000000000000000000"
                          "000000000100000003000000020000000100000005000000000000000300000000000000000000000000000002"
                          "000000"));
  EXPECT_EQ(log.size(), 92u);
}

// RGO (LSP bit 0): the descriptors only, NNSIDS 0 (python3 struct, as above with no NSIDs).
TEST(AnaLog, GoldenBytesReturnGroupsOnly) {
  const auto groups = two_groups();
  const auto log = make_ana_log(0x0102030405060708ull, groups, true);
  EXPECT_EQ(log, from_hex("0807060504030201020000000000000001000000000000000500000000000000010000000000000000000000"
                          "000000000200000000000000050000000000000003000000000000000000000000000000"));
}

TEST(AnaLog, EmptyLogIsTheHeader) {
  const auto log = make_ana_log(7, {}, false);
  ASSERT_EQ(log.size(), 16u);
  EXPECT_EQ(log[0], 7);
  EXPECT_EQ(log[8], 0);
}

TEST(AnaLog, StatesAndStatuses) {
  // ANAS values (Figure 228) and the path-related status codes (Figure 107: SCT 3h, SC 01h/02h/03h).
  EXPECT_EQ(static_cast<uint8_t>(AnaState::optimized), 0x01);
  EXPECT_EQ(static_cast<uint8_t>(AnaState::non_optimized), 0x02);
  EXPECT_EQ(static_cast<uint8_t>(AnaState::inaccessible), 0x03);
  EXPECT_EQ(static_cast<uint8_t>(AnaState::persistent_loss), 0x04);
  EXPECT_EQ(static_cast<uint8_t>(AnaState::change), 0x0F);
  EXPECT_TRUE(is_valid_ana_state(0x0F));
  EXPECT_FALSE(is_valid_ana_state(0x00));
  EXPECT_FALSE(is_valid_ana_state(0x05));
  EXPECT_TRUE(ana_io_status(AnaState::optimized).ok());
  EXPECT_TRUE(ana_io_status(AnaState::non_optimized).ok());
  // The CQE status field as the Linux host's NVME_SC_ANA_* constants have it: 0x301, 0x302, 0x303, no DNR.
  EXPECT_EQ(ana_io_status(AnaState::persistent_loss).field(), 0x301);
  EXPECT_EQ(ana_io_status(AnaState::inaccessible).field(), 0x302);
  EXPECT_EQ(ana_io_status(AnaState::change).field(), 0x303);
  EXPECT_FALSE(ana_io_status(AnaState::inaccessible).dnr());
  EXPECT_STREQ(status_name(status::ana_transition), "Asymmetric Access Transition");
}

TEST(AnaLog, ChangeNoticeAndMaxSize) {
  // AER DW0: type 2h in 2:0, information 03h in 15:8, log page 0Ch in 23:16 (Base 2.0 Figure 147).
  EXPECT_EQ(kAnaChangeEvent, 0x000C0302u);
  // The Linux host's sizing: 16 + NANAGRPID * 32 + MNAN * 4 (nvme_mpath_init_identify).
  EXPECT_EQ(ana_log_max_size(128, 1024), 16u + 4096u + 4096u);
}

}  // namespace
}  // namespace rdmablk::protocol
