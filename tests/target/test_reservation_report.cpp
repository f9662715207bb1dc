// The reservation model's access check and Reservation Report (target/reservations/reservation_model.h): the
// table of NVMe Base 2.0 8.19 "Command Behavior in the Presence of a Reservation" for every type x role x
// access, the NVM commands' classes (NVM Command Set 1.0 Figure 136), the Reservation Status Extended data
// structure, requests decoded from the wire, the states the model refuses, and random command sequences that
// must keep every rule. The commands themselves: test_reservation_model.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "protocol/command.h"
#include "protocol/endian.h"
#include "protocol/reservation.h"
#include "target/reservation_test_util.h"
#include "target/reservations/reservation_model.h"

namespace rdmablk::target::reservations::testing {
namespace {

// ---- the access table ------------------------------------------------------------------------------------------

struct AccessRow {
  RT type;
  const char* holder;  // "RW": read and write allowed, "R-": read only, "--": neither
  const char* registrant;
  const char* non_registrant;
};

// Base 2.0 8.19 (2.1 Figure 645): Y/N per type and role; with types 5-6 a registrant is a holder.
constexpr AccessRow kTable[] = {
    {RT::write_exclusive, "RW", "R-", "R-"},
    {RT::exclusive_access, "RW", "--", "--"},
    {RT::write_exclusive_registrants_only, "RW", "RW", "R-"},
    {RT::exclusive_access_registrants_only, "RW", "RW", "--"},
    {RT::write_exclusive_all_registrants, "RW", "RW", "R-"},
    {RT::exclusive_access_all_registrants, "RW", "RW", "--"},
};

std::string rights(const ReservationState& s, const HostId& h) {
  std::string out;
  out += check_access(s, h, Access::read).ok() ? 'R' : '-';
  out += check_access(s, h, Access::write).ok() ? 'W' : '-';
  return out;
}

TEST(ReservationAccessTest, EveryTypeRoleAndAccessFollowsTheTable) {
  for (const auto& row : kTable) {
    ReservationState s = held_by_a(row.type);  // A holds; B and C are registrants; D is not
    EXPECT_EQ(rights(s, kA), row.holder) << static_cast<int>(row.type);
    EXPECT_EQ(rights(s, kB), row.registrant) << static_cast<int>(row.type);
    EXPECT_EQ(rights(s, kD), row.non_registrant) << static_cast<int>(row.type);
    for (const HostId& h : {kA, kB, kD}) EXPECT_EQ(check_access(s, h, Access::none), st::success);
    // Denied is Reservation Conflict, with DNR.
    if (rights(s, kD) != "RW") {
      EXPECT_EQ(check_access(s, kD, Access::write), st::reservation_conflict);
    }
  }
}

TEST(ReservationAccessTest, WithoutAReservationEveryoneMayReadAndWrite) {
  ReservationState s = three_registrants();
  for (const HostId& h : {kA, kB, kD}) EXPECT_EQ(rights(s, h), "RW");
}

// Rights follow the host identifier, not the controller: a registrant's other controllers share them, and a
// host that unregisters loses them on all.
TEST(ReservationAccessTest, RightsBelongToTheHostAndGoWithItsRegistration) {
  ReservationState s = held_by_a(RT::exclusive_access_registrants_only);
  EXPECT_EQ(rights(s, kB), "RW");
  EXPECT_TRUE(unregister(s, kB, 2).ok());
  EXPECT_EQ(rights(s, kB), "--");
  EXPECT_EQ(rights(s, kC), "RW");
}

// SPDK shows one registrant as the holder of an all-registrants reservation; every registrant holds it.
TEST(ReservationAccessTest, SpdkDepartureEveryRegistrantHoldsAnAllRegistrantsReservation) {
  for (RT t : {RT::write_exclusive_all_registrants, RT::exclusive_access_all_registrants}) {
    ReservationState s = held_by_a(t);
    for (const HostId& h : {kA, kB, kC}) EXPECT_TRUE(holds_reservation(s, h));
    EXPECT_FALSE(holds_reservation(s, kD));
    EXPECT_TRUE(do_register(s, kD, 4).ok());
    EXPECT_TRUE(holds_reservation(s, kD)) << "a later registrant holds it too";
  }
}

TEST(ReservationAccessTest, NvmCommandsAreReadsOrWrites) {
  using protocol::IoOpcode;
  auto of = [](IoOpcode op) { return io_access(static_cast<uint8_t>(op)); };
  for (IoOpcode op : {IoOpcode::read, IoOpcode::compare, IoOpcode::verify}) EXPECT_EQ(of(op), Access::read);
  for (IoOpcode op : {IoOpcode::flush, IoOpcode::write, IoOpcode::write_uncorrectable, IoOpcode::write_zeroes,
                      IoOpcode::dataset_management, IoOpcode::copy})
    EXPECT_EQ(of(op), Access::write) << static_cast<int>(op);
  for (IoOpcode op : {IoOpcode::reservation_register, IoOpcode::reservation_report, IoOpcode::reservation_acquire,
                      IoOpcode::reservation_release, IoOpcode::fabrics})
    EXPECT_EQ(of(op), Access::none) << static_cast<int>(op);
  EXPECT_EQ(io_access(0x80), Access::none);
}

// ---- Reservation Report ----------------------------------------------------------------------------------------

struct Entry {
  uint16_t cntlid;
  uint8_t rcsts;
  uint64_t rkey;
  HostId host;
};

protocol::ReservationStatusExtHeader header_of(const std::vector<uint8_t>& data) {
  EXPECT_GE(data.size(), sizeof(protocol::ReservationStatusExtHeader));
  return protocol::load<protocol::ReservationStatusExtHeader>(data.data());
}

uint16_t regstrnt(const protocol::ReservationStatusExtHeader& h) {
  return static_cast<uint16_t>(h.h.regctl[0] | h.h.regctl[1] << 8);
}

std::vector<Entry> entries_of(const std::vector<uint8_t>& data) {
  std::vector<Entry> out;
  for (std::size_t off = 64; off + 64 <= data.size(); off += 64) {
    const auto e = protocol::load<protocol::RegisteredControllerExt>(data.data() + off);
    EXPECT_EQ(e.rsvd3, (std::array<uint8_t, 5>{}));
    EXPECT_EQ(e.rsvd32, (std::array<uint8_t, 32>{}));
    out.push_back({e.cntlid.get(), e.rcsts, e.rkey.get(), e.hostid});
  }
  return out;
}

bool operator==(const Entry& a, const Entry& b) {
  return a.cntlid == b.cntlid && a.rcsts == b.rcsts && a.rkey == b.rkey && a.host == b.host;
}

std::vector<uint8_t> report(const ReservationState& s, std::vector<ControllerOfHost> controllers,
                            uint64_t max_bytes = 1 << 20) {
  auto r = build_report(s, controllers, /*extended=*/true, max_bytes);
  EXPECT_TRUE(r.has_value());
  return r ? *r : std::vector<uint8_t>{};
}

TEST(ReservationReportTest, TheExtendedStructureHasTheHeaderAndOneEntryPerRegistrant) {
  ReservationState s = held_by_a(RT::write_exclusive);
  s.generation = 0x01020304;
  s.ptpl = true;
  const auto data = report(s, {{kB, 7}, {kA, 1}});
  ASSERT_EQ(data.size(), 64u + 3 * 64u);
  const auto h = header_of(data);
  EXPECT_EQ(h.h.gen.get(), 0x01020304u);
  EXPECT_EQ(h.h.rtype, 1);
  EXPECT_EQ(regstrnt(h), 3);
  EXPECT_EQ(h.h.ptpls, 1);
  EXPECT_EQ(h.h.rsvd7, (std::array<uint8_t, 2>{}));
  EXPECT_EQ(h.h.rsvd10, (std::array<uint8_t, 14>{}));
  EXPECT_EQ(h.rsvd24, (std::array<uint8_t, 40>{}));
  // In registration order; C has no controller: CNTLID FFFFh ("not associated with any controller").
  EXPECT_EQ(entries_of(data), (std::vector<Entry>{{1, 1, 1, kA}, {7, 0, 2, kB}, {0xFFFF, 0, 3, kC}}));
}

// One entry per registrant (Base 2.1: "a Registrant Extended data structure for each such registrant"), with the
// lowest CNTLID of the host's controllers.
TEST(ReservationReportTest, AHostWithSeveralControllersHasOneEntry) {
  ReservationState s = three_registrants();
  const auto data = report(s, {{kB, 9}, {kA, 4}, {kB, 3}, {kA, 6}, {kD, 2}});
  EXPECT_EQ(regstrnt(header_of(data)), 3);
  const auto e = entries_of(data);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].cntlid, 4);
  EXPECT_EQ(e[1].cntlid, 3);
  EXPECT_EQ(e[2].cntlid, 0xFFFF);
}

// SPDK marks one registrant as holder; RCSTS bit 0 is on every registrant of a type 5-6 reservation.
TEST(ReservationReportTest, SpdkDepartureEveryRegistrantIsShownHoldingAnAllRegistrantsReservation) {
  for (RT t : {RT::write_exclusive_all_registrants, RT::exclusive_access_all_registrants}) {
    const ReservationState s = held_by_a(t);
    const auto data = report(s, {});
    EXPECT_EQ(header_of(data).h.rtype, static_cast<uint8_t>(t));
    for (const auto& e : entries_of(data)) EXPECT_EQ(e.rcsts, protocol::kRcstsHoldsReservation);
  }
  ReservationState single = held_by_a(RT::exclusive_access_registrants_only);
  const auto e = entries_of(report(single, {}));
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].rcsts, 1);
  EXPECT_EQ(e[1].rcsts, 0);
  EXPECT_EQ(e[2].rcsts, 0);
}

// A fabrics host has a 128-bit Host Identifier: EDS cleared is Host Identifier Inconsistent Format.
TEST(ReservationReportTest, TheNonExtendedStructureIsHostIdentifierInconsistentFormat) {
  const auto r = build_report(three_registrants(), {}, /*extended=*/false, 4096);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error(), st::host_id_inconsistent_format);
}

// NUMD shorter than the structure: that much of it, the header still counting every registrant.
TEST(ReservationReportTest, TheStructureIsCutToNumdButCountsEveryRegistrant) {
  const ReservationState s = held_by_a(RT::write_exclusive);
  protocol::ReservationReportCommand cmd{};
  cmd.set(96, true);
  const auto r = build_report(s, {}, cmd.extended(), cmd.data_length());
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->size(), 96u);
  EXPECT_EQ(regstrnt(header_of(*r)), 3);
  EXPECT_EQ(report(s, {}, 4).size(), 4u);
  EXPECT_EQ(report(s, {}, 1000).size(), 256u) << "no more than the structure";
}

TEST(ReservationReportTest, NoRegistrantsIsAHeaderAlone) {
  const auto data = report(ReservationState{}, {});
  ASSERT_EQ(data.size(), 64u);
  const auto h = header_of(data);
  EXPECT_EQ(h.h.rtype, 0);
  EXPECT_EQ(regstrnt(h), 0);
  EXPECT_EQ(h.h.ptpls, 0);
}

// ---- requests from the wire ------------------------------------------------------------------------------------

TEST(ReservationRequestTest, RequestsAreDecodedFromTheCommandAndItsData) {
  protocol::ReservationRegisterCommand reg{};
  reg.set(protocol::RegisterAction::replace_key, true, ChangePtpl::set);
  protocol::ReservationRegisterData reg_data{};
  reg_data.crkey.set(0x1111);
  reg_data.nrkey.set(0x2222);
  const auto r = RegisterRequest::from(reg, reg_data);
  EXPECT_EQ(r.action, 2);
  EXPECT_TRUE(r.iekey);
  EXPECT_EQ(r.cptpl, 3);
  EXPECT_EQ(r.crkey, 0x1111u);
  EXPECT_EQ(r.nrkey, 0x2222u);

  protocol::ReservationAcquireCommand acq{};
  acq.set(protocol::AcquireAction::preempt_and_abort, RT::exclusive_access_all_registrants);
  protocol::ReservationAcquireData acq_data{};
  acq_data.crkey.set(5);
  acq_data.prkey.set(6);
  const auto a = AcquireRequest::from(acq, acq_data);
  EXPECT_EQ(a.action, 2);
  EXPECT_FALSE(a.iekey);
  EXPECT_EQ(a.rtype, 6);
  EXPECT_EQ(a.crkey, 5u);
  EXPECT_EQ(a.prkey, 6u);

  protocol::ReservationReleaseCommand rel{};
  rel.set(protocol::ReleaseAction::clear, RT::write_exclusive, true);
  protocol::ReservationReleaseData rel_data{};
  rel_data.crkey.set(7);
  const auto l = ReleaseRequest::from(rel, rel_data);
  EXPECT_EQ(l.action, 1);
  EXPECT_TRUE(l.iekey);
  EXPECT_EQ(l.rtype, 1);
  EXPECT_EQ(l.crkey, 7u);
}

// ---- states the model never produces ---------------------------------------------------------------------------

TEST(ReservationConsistencyTest, ImpossibleStatesAreNamed) {
  EXPECT_EQ(inconsistency(ReservationState{}), std::nullopt);
  EXPECT_EQ(inconsistency(held_by_a(RT::write_exclusive)), std::nullopt);
  EXPECT_EQ(inconsistency(held_by_a(RT::exclusive_access_all_registrants)), std::nullopt);
  auto bad = [](auto change) {
    ReservationState s = held_by_a(RT::write_exclusive);
    change(s);
    return inconsistency(s).has_value();
  };
  EXPECT_TRUE(bad([](ReservationState& s) { s.holder = kD; }));              // holder not a registrant
  EXPECT_TRUE(bad([](ReservationState& s) { s.type = RT::none; }));          // a holder without a reservation
  EXPECT_TRUE(bad([](ReservationState& s) { s.type = static_cast<RT>(7); }));  // a reserved type
  EXPECT_TRUE(bad([](ReservationState& s) { s.registrants.push_back({kB, 9}); }));  // B twice
  EXPECT_TRUE(bad([](ReservationState& s) { s.type = RT::write_exclusive_all_registrants; }));  // holder with type 5
  EXPECT_TRUE(bad([](ReservationState& s) {
    s.type = RT::exclusive_access_all_registrants;
    s.holder = {};
    s.registrants.clear();
  }));
}

// ---- random sequences ------------------------------------------------------------------------------------------

// What every command must keep, whatever it is asked: a consistent state; a failure changes nothing; nobody is
// notified of their own command; a preempted host is no longer registered, a released one still is; aborts only
// for preempted hosts; the generation moves exactly on successful Register, Clear and Preempt.
void check_step(const ReservationState& before, const ReservationState& after, const Outcome& out, const HostId& issuer,
                bool counts) {
  ASSERT_EQ(inconsistency(after), std::nullopt);
  if (!out.ok()) {
    ASSERT_EQ(after, before);
    ASSERT_TRUE(out.notices.empty() && out.abort_hosts.empty() && !out.changed);
    return;
  }
  ASSERT_EQ(after.generation, counts ? before.generation + 1 : before.generation);
  if (after != before) {
    ASSERT_TRUE(out.changed);
  }
  for (const auto& n : out.notices) {
    ASSERT_NE(n.host, issuer);
    const bool registered = find_registrant(after, n.host) != nullptr;
    if (n.type == RN::reservation_released) {
      ASSERT_TRUE(registered);
    } else {
      ASSERT_FALSE(registered);  // registration or reservation preempted: no longer a registrant
    }
  }
  for (const auto& h : out.abort_hosts) {
    ASSERT_NE(h, issuer);
    ASSERT_EQ(find_registrant(after, h), nullptr);
  }
}

TEST(ReservationRandomTest, RandomCommandsKeepEveryRule) {
  std::mt19937 rng(25);
  const HostId hosts[] = {kA, kB, kC, kD};
  auto pick = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  ReservationState s;
  for (int i = 0; i < 50'000; ++i) {
    const HostId& h = hosts[pick(4)];
    const uint64_t k1 = pick(4);
    const uint64_t k2 = pick(4);
    const auto action = static_cast<uint8_t>(pick(10) < 9 ? pick(3) : pick(8));  // now and then a reserved one
    const auto rtype = static_cast<uint8_t>(pick(10) < 9 ? 1 + pick(6) : pick(256));
    const bool iekey = pick(8) == 0;
    const ReservationState before = s;
    Outcome out;
    bool counts = false;
    switch (pick(3)) {
      case 0:
        out = reservation_register(s, h, {action, iekey, static_cast<uint8_t>(pick(4)), k1, k2}, pick(2) == 0);
        counts = true;
        break;
      case 1:
        out = reservation_acquire(s, h, {action, iekey, rtype, k1, k2});
        counts = action == 1 || action == 2;
        break;
      default:
        out = reservation_release(s, h, {action, iekey, rtype, k1});
        counts = action == 1;
        break;
    }
    ASSERT_NO_FATAL_FAILURE(check_step(before, s, out, h, counts)) << "step " << i;
    if (!out.abort_hosts.empty()) {
      ASSERT_EQ(action, 2);
    }
  }
}

}  // namespace
}  // namespace rdmablk::target::reservations::testing
