// Userspace multipath (initiator/ublk/multipath.h): which path carries I/O, and the ANA log page as the
// host parses it. The failover itself runs against two real targets in the VM lab
// (tests/vm/attach-ublk-multipath).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "initiator/ublk/multipath.h"

using namespace rdmablk;
using namespace rdmablk::initiator::ublk;
using protocol::AnaState;

namespace {

constexpr auto live = PathConnection::live;
constexpr auto connecting = PathConnection::connecting;
constexpr auto failed = PathConnection::failed;

std::optional<std::size_t> choose(std::vector<PathStatus> paths, std::optional<std::size_t> current = std::nullopt) {
  return choose_path(paths, current);
}

// An ANA log page written out by hand from NVMe Base 2.0 Figures 226 (header) and 227 (group descriptor),
// little-endian: CHGCNT 5, NGRPS 2;
//   group 1: NNSIDS 2, CHGCNT 3, ANAS 01h (optimized), NSIDs 1 and 2;
//   group 2: NNSIDS 1, CHGCNT 4, ANAS 03h (inaccessible), NSID 7.
const std::vector<uint8_t> kTwoGroups = {
    // header: CHGCNT (8), NGRPS (2), reserved (6)
    0x05, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x00, 0, 0, 0, 0, 0, 0,
    // group 1: ANAGRPID (4), NNSIDS (4), CHGCNT (8), ANAS (1), reserved (15)
    0x01, 0, 0, 0, 0x02, 0, 0, 0, 0x03, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0x01, 0, 0, 0, 0x02, 0, 0, 0,  // NSIDs 1, 2
    // group 2
    0x02, 0, 0, 0, 0x01, 0, 0, 0, 0x04, 0, 0, 0, 0, 0, 0, 0, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0x07, 0, 0, 0,  // NSID 7
};

}  // namespace

// --- path choice ---------------------------------------------------------------------------------------

TEST(MultipathChoice, OptimizedBeforeNonOptimized) {
  EXPECT_EQ(choose({{live, AnaState::non_optimized}, {live, AnaState::optimized}}), 1u);
  EXPECT_EQ(choose({{live, AnaState::optimized}, {live, AnaState::non_optimized}}), 0u);
  // The current path keeps the I/O while nothing better is there.
  EXPECT_EQ(choose({{live, AnaState::non_optimized}, {live, AnaState::non_optimized}}, 1u), 1u);
  // ... and loses it to a better one (failback).
  EXPECT_EQ(choose({{live, AnaState::optimized}, {live, AnaState::non_optimized}}, 1u), 0u);
}

TEST(MultipathChoice, UnusableStatesCarryNoIo) {
  for (auto s : {AnaState::inaccessible, AnaState::persistent_loss, AnaState::change}) {
    EXPECT_EQ(choose({{live, s}, {live, AnaState::non_optimized}}, 0u), 1u) << protocol::ana_state_name(s);
    EXPECT_EQ(choose({{live, s}}), std::nullopt) << protocol::ana_state_name(s);
  }
  EXPECT_TRUE(ana_usable(AnaState::optimized));
  EXPECT_TRUE(ana_usable(AnaState::non_optimized));
  EXPECT_FALSE(ana_usable(AnaState::change));
}

TEST(MultipathChoice, OnlyLivePathsCount) {
  // The optimized path is down (its target killed): the non-optimized one takes the I/O.
  EXPECT_EQ(choose({{connecting, AnaState::optimized}, {live, AnaState::non_optimized}}, 0u), 1u);
  EXPECT_EQ(choose({{failed, AnaState::optimized}, {live, AnaState::non_optimized}}), 1u);
  EXPECT_EQ(choose({{connecting, std::nullopt}, {connecting, std::nullopt}}, 0u), std::nullopt);
  EXPECT_EQ(choose({}), std::nullopt);
}

TEST(MultipathChoice, NoAnaReportingCountsAsOptimized) {
  EXPECT_EQ(choose({{live, AnaState::non_optimized}, {live, std::nullopt}}), 1u);
  EXPECT_EQ(choose({{live, std::nullopt}, {live, AnaState::optimized}}), 0u);  // equals: the first
  EXPECT_EQ(choose({{live, std::nullopt}, {live, AnaState::optimized}}, 1u), 1u);
}

TEST(MultipathChoice, ACurrentIndexOutOfRangeIsIgnored) {
  EXPECT_EQ(choose({{live, AnaState::optimized}}, 5u), 0u);
}

TEST(MultipathChoice, Names) {
  EXPECT_STREQ(path_connection_name(live), "live");
  EXPECT_STREQ(path_connection_name(connecting), "connecting");
  EXPECT_STREQ(path_connection_name(failed), "failed");
  EXPECT_EQ(ana_state_text(AnaState::non_optimized), "non-optimized");
  EXPECT_EQ(ana_state_text(std::nullopt), "none");
}

// --- the ANA log page ----------------------------------------------------------------------------------

TEST(MultipathAnaLog, ParsesGoldenBytes) {
  ASSERT_EQ(kTwoGroups.size(), 16u + 32u + 8u + 32u + 4u);
  auto log = parse_ana_log(kTwoGroups);
  ASSERT_TRUE(log) << log.error().message;
  EXPECT_EQ(log->chgcnt, 5u);
  ASSERT_EQ(log->groups.size(), 2u);
  EXPECT_EQ(log->groups[0].anagrpid, 1u);
  EXPECT_EQ(log->groups[0].chgcnt, 3u);
  EXPECT_EQ(log->groups[0].state, AnaState::optimized);
  EXPECT_EQ(log->groups[0].nsids, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(log->groups[1].anagrpid, 2u);
  EXPECT_EQ(log->groups[1].state, AnaState::inaccessible);
  EXPECT_EQ(log->groups[1].nsids, (std::vector<uint32_t>{7}));

  EXPECT_EQ(ana_state_of(*log, 2, 0), AnaState::optimized);
  EXPECT_EQ(ana_state_of(*log, 7, 1), AnaState::inaccessible);  // the NSID list wins over ANAGRPID
  EXPECT_EQ(ana_state_of(*log, 9, 2), AnaState::inaccessible);  // not listed: its group from Identify
  EXPECT_EQ(ana_state_of(*log, 9, 3), std::nullopt);
  EXPECT_EQ(ana_state_of(*log, 9, 0), std::nullopt);
}

TEST(MultipathAnaLog, ReadsWhatTheTargetWrites) {
  // The target's serializer (protocol/ana.h), RGO (groups only) and with NSID lists; bytes past the log
  // (the host reads a size fixed from Identify) are ignored.
  std::vector<protocol::AnaGroupEntry> groups = {{1, AnaState::non_optimized, 9, {1}},
                                                 {4, AnaState::change, 2, {3, 5}}};
  for (bool rgo : {false, true}) {
    auto page = protocol::make_ana_log(11, groups, rgo);
    page.resize(page.size() + 64, 0);
    auto log = parse_ana_log(page);
    ASSERT_TRUE(log) << log.error().message;
    EXPECT_EQ(log->chgcnt, 11u);
    ASSERT_EQ(log->groups.size(), 2u);
    EXPECT_EQ(log->groups[1].anagrpid, 4u);
    EXPECT_EQ(log->groups[1].state, AnaState::change);
    EXPECT_EQ(log->groups[1].nsids.size(), rgo ? 0u : 2u);
    EXPECT_EQ(ana_state_of(*log, 5, 4), AnaState::change);
    EXPECT_EQ(ana_state_of(*log, 1, 1), AnaState::non_optimized);
  }
}

TEST(MultipathAnaLog, ReservedAnasBitsAreMasked) {
  // ANAS bits 7:4 are reserved: only 3:0 is the state.
  auto page = kTwoGroups;
  page[16 + 16] = 0xF2;
  auto log = parse_ana_log(page);
  ASSERT_TRUE(log) << log.error().message;
  EXPECT_EQ(log->groups[0].state, AnaState::non_optimized);
}

TEST(MultipathAnaLog, RejectsWhatDoesNotFit) {
  auto error = [](std::vector<uint8_t> page) {
    auto log = parse_ana_log(page);
    EXPECT_FALSE(log);
    return log ? std::string() : log.error().message;
  };
  EXPECT_EQ(error(std::vector<uint8_t>(kTwoGroups.begin(), kTwoGroups.begin() + 8)),
            "ANA log: 8 bytes, shorter than its 16-byte header");
  // NGRPS 3 with two descriptors there.
  auto more_groups = kTwoGroups;
  more_groups[8] = 3;
  EXPECT_EQ(error(more_groups), "ANA log: descriptor 2 of 3 at byte 92 runs past the 92 bytes read");
  // Group 2 claims 2 NSIDs, 4 bytes are left.
  auto more_nsids = kTwoGroups;
  more_nsids[56 + 4] = 2;
  EXPECT_EQ(error(more_nsids), "ANA log: group 2 lists 2 NSIDs, more than the 4 bytes left hold");
  // A huge NNSIDS must not wrap a size computation.
  auto huge = kTwoGroups;
  huge[16 + 4] = 0xFF, huge[16 + 5] = 0xFF, huge[16 + 6] = 0xFF, huge[16 + 7] = 0xFF;
  EXPECT_EQ(error(huge), "ANA log: group 1 lists 4294967295 NSIDs, more than the 44 bytes left hold");
  auto bad_state = kTwoGroups;
  bad_state[16 + 16] = 0x05;
  EXPECT_EQ(error(bad_state), "ANA log: group 1 has the undefined ANA state 0x5");
  auto zero_id = kTwoGroups;
  zero_id[16] = 0;
  EXPECT_EQ(error(zero_id), "ANA log: descriptor 0 at byte 16 has ANAGRPID 0");
}

TEST(MultipathAnaLog, EmptyLogHasNoGroups) {
  std::vector<uint8_t> page(16, 0);
  auto log = parse_ana_log(page);
  ASSERT_TRUE(log);
  EXPECT_TRUE(log->groups.empty());
  EXPECT_EQ(ana_state_of(*log, 1, 1), std::nullopt);
}
