// The persistent-reservation model's commands (target/reservations/reservation_model.h) against NVMe Base 2.0
// 8.19 (2.1/2.2 8.1.22) and 7.2-7.4: Register (register, unregister, replace, IEKEY, CPTPL), Acquire (acquire,
// preempt, preempt and abort), Release (release, clear), the generation counter and who is notified of what.
// The tests named SpdkDeparture... pin points where SPDK's target departs from the specification (issue 25);
// test_reservation_report.cpp has the access table and the Reservation Report.
#include <gtest/gtest.h>

#include <vector>

#include "protocol/reservation.h"
#include "target/reservation_test_util.h"
#include "target/reservations/reservation_model.h"

namespace rdmablk::target::reservations::testing {
namespace {

// A failed command: its status, and the state, generation included, untouched.
void expect_rejected(ReservationState& s, Outcome (*cmd)(ReservationState&), protocol::Status want) {
  const ReservationState before = s;
  const Outcome out = cmd(s);
  EXPECT_EQ(out.status, want);
  EXPECT_FALSE(out.changed);
  EXPECT_TRUE(out.notices.empty());
  EXPECT_TRUE(out.abort_hosts.empty());
  EXPECT_EQ(s, before);
}

// ---- Register -------------------------------------------------------------------------------------------------

TEST(ReservationRegisterTest, RegisterAddsARegistrantAndCountsTheGeneration) {
  ReservationState s;
  const Outcome out = do_register(s, kA, 0x1111);
  EXPECT_TRUE(out.ok());
  EXPECT_TRUE(out.changed);
  EXPECT_TRUE(out.notices.empty());
  ASSERT_EQ(s.registrants.size(), 1u);
  EXPECT_EQ(s.registrants[0], (Registrant{kA, 0x1111}));
  EXPECT_EQ(s.generation, 1u);
  EXPECT_EQ(s.type, RT::none);
}

// GEN counts every Register that "completes successfully", this one too, though no registration changes.
TEST(ReservationRegisterTest, RegisteringTheSameKeyAgainSucceedsAndCountsTheGeneration) {
  ReservationState s = three_registrants();
  const auto registrants = s.registrants;
  const Outcome out = do_register(s, kB, 2);
  EXPECT_TRUE(out.ok());
  EXPECT_EQ(s.registrants, registrants);
  EXPECT_EQ(s.generation, 1u);
  EXPECT_TRUE(out.changed);
}

TEST(ReservationRegisterTest, RegisteringAnotherKeyWhenRegisteredIsAConflict) {
  ReservationState s = three_registrants();
  expect_rejected(
      s, [](ReservationState& x) { return do_register(x, kB, 9); }, st::reservation_conflict);
}

// "the IEKEY field shall be ignored" for RREGA 000b, and CRKEY is reserved there.
TEST(ReservationRegisterTest, RegisterIgnoresIekeyAndCrkey) {
  ReservationState s = three_registrants();
  EXPECT_TRUE(reservation_register(s, kD, {0, true, 0, 0xDEAD, 4}, true).ok());
  EXPECT_EQ(find_registrant(s, kD)->key, 4u);
  // IEKEY does not let a registrant change its key through Register either.
  expect_rejected(
      s,
      [](ReservationState& x) {
        return reservation_register(x, kD, {0, true, 0, 4, 5}, true);
      },
      st::reservation_conflict);
}

TEST(ReservationRegisterTest, HostsMayShareAKey) {
  ReservationState s;
  EXPECT_TRUE(do_register(s, kA, 7).ok());
  EXPECT_TRUE(do_register(s, kB, 7).ok());
  EXPECT_EQ(s.registrants.size(), 2u);
}

TEST(ReservationRegisterTest, UnregisterChecksTheKeyUnlessIekey) {
  ReservationState s = three_registrants();
  expect_rejected(
      s, [](ReservationState& x) { return unregister(x, kB, 9); }, st::reservation_conflict);
  EXPECT_TRUE(unregister(s, kB, 2).ok());
  EXPECT_EQ(find_registrant(s, kB), nullptr);
  EXPECT_TRUE(unregister(s, kC, 9, /*iekey=*/true).ok());
  EXPECT_EQ(find_registrant(s, kC), nullptr);
  EXPECT_EQ(s.generation, 2u);
  EXPECT_EQ(s.registrants, (std::vector<Registrant>{{kA, 1}}));
}

// IEKEY lifts the key check, not the registration check ("Unregistering": "If the host is not a registrant,
// then the command is aborted with a status code of Reservation Conflict").
TEST(ReservationRegisterTest, UnregisterByANonRegistrantIsAConflictEvenWithIekey) {
  ReservationState s = three_registrants();
  expect_rejected(
      s, [](ReservationState& x) { return unregister(x, kD, 0); }, st::reservation_conflict);
  expect_rejected(
      s, [](ReservationState& x) { return unregister(x, kD, 0, true); }, st::reservation_conflict);
}

TEST(ReservationRegisterTest, ReplaceChangesTheKeyAndKeepsTheReservation) {
  ReservationState s = held_by_a(RT::exclusive_access);
  expect_rejected(
      s, [](ReservationState& x) { return replace(x, kA, 9, 10); }, st::reservation_conflict);
  const Outcome out = replace(s, kA, 1, 10);
  EXPECT_TRUE(out.ok());
  EXPECT_TRUE(out.notices.empty());
  EXPECT_EQ(find_registrant(s, kA)->key, 10u);
  EXPECT_EQ(s.type, RT::exclusive_access);
  EXPECT_EQ(s.holder, kA);
  EXPECT_TRUE(replace(s, kA, 0xBAD, 11, /*iekey=*/true).ok());
  EXPECT_EQ(find_registrant(s, kA)->key, 11u);
  EXPECT_EQ(s.generation, 2u);
}

// "A host may replace its reservation key without regard to its registration status or current reservation
// key value by setting the Ignore Existing Key (IEKEY) bit to '1'."
TEST(ReservationRegisterTest, ReplaceWithIekeyRegistersANonRegistrant) {
  ReservationState s = three_registrants();
  expect_rejected(
      s, [](ReservationState& x) { return replace(x, kD, 0, 4); }, st::reservation_conflict);
  EXPECT_TRUE(replace(s, kD, 0, 4, true).ok());
  EXPECT_EQ(find_registrant(s, kD)->key, 4u);
}

TEST(ReservationRegisterTest, ReservedActionIsInvalidField) {
  for (uint8_t action = 3; action <= 7; ++action) {
    ReservationState s = three_registrants();
    const ReservationState before = s;
    EXPECT_EQ(reservation_register(s, kD, {action, false, 0, 0, 4}, true).status, st::invalid_field) << int{action};
    EXPECT_EQ(s, before);
  }
}

TEST(ReservationRegisterTest, CptplSetsClearsOrKeepsPtplOnSuccessOnly) {
  ReservationState s;
  EXPECT_TRUE(do_register(s, kA, 1, ChangePtpl::set).ok());
  EXPECT_TRUE(s.ptpl);
  EXPECT_TRUE(do_register(s, kA, 1, ChangePtpl::no_change).ok());
  EXPECT_TRUE(s.ptpl);
  // A failing register leaves PTPL as it was: CPTPL is a side effect of a command that is processed.
  EXPECT_EQ(do_register(s, kA, 2, ChangePtpl::clear).status, st::reservation_conflict);
  EXPECT_TRUE(s.ptpl);
  EXPECT_TRUE(unregister(s, kA, 1).ok());  // no change: PTPL belongs to the namespace, not to a registrant
  EXPECT_TRUE(s.ptpl);
  EXPECT_TRUE(do_register(s, kA, 1, ChangePtpl::clear).ok());
  EXPECT_FALSE(s.ptpl);
}

TEST(ReservationRegisterTest, CptplReservedOrUnsupportedIsInvalidField) {
  ReservationState s;
  expect_rejected(
      s, [](ReservationState& x) { return do_register(x, kA, 1, ChangePtpl::reserved); }, st::invalid_field);
  expect_rejected(
      s,
      [](ReservationState& x) {
        return reservation_register(x, kA, {0, false, 3, 0, 1}, false);
      },
      st::invalid_field);
  // Clearing what the namespace cannot set is no error.
  EXPECT_TRUE(reservation_register(s, kA, {0, false, 2, 0, 1}, false).ok());
  EXPECT_FALSE(s.ptpl);
}

// "a Reservation Register command shall never fail due to lack of resources": the only bound is REGSTRNT.
TEST(ReservationRegisterTest, RegistrantsAreBoundOnlyByTheReportsCount) {
  ReservationState s;
  for (std::size_t i = 0; i < kMaxRegistrants; ++i) {
    HostId h{};
    h[0] = static_cast<uint8_t>(i);
    h[1] = static_cast<uint8_t>(i >> 8);
    h[2] = 1;
    s.registrants.push_back({h, i});
  }
  EXPECT_EQ(do_register(s, kA, 1).status, st::internal_error);
  EXPECT_EQ(s.registrants.size(), kMaxRegistrants);
}

// ---- unregister of a holder ("Unregistering") ------------------------------------------------------------------

// Types 1-4: the only holder unregisters, the reservation goes; types 3-4 notify the other registrants.
TEST(ReservationUnregisterHolderTest, TheOnlyHolderUnregisteringReleasesTheReservation) {
  for (RT t : {RT::write_exclusive, RT::exclusive_access, RT::write_exclusive_registrants_only,
               RT::exclusive_access_registrants_only}) {
    ReservationState s = held_by_a(t);
    const Outcome out = unregister(s, kA, 1);
    EXPECT_TRUE(out.ok());
    EXPECT_EQ(s.type, RT::none);
    EXPECT_EQ(s.holder, HostId{});
    const bool notifies = t == RT::write_exclusive_registrants_only || t == RT::exclusive_access_registrants_only;
    const std::vector<Notice> want =
        notifies ? std::vector<Notice>{{kB, RN::reservation_released}, {kC, RN::reservation_released}}
                 : std::vector<Notice>{};
    EXPECT_EQ(out.notices, want) << static_cast<int>(t);
  }
}

// Types 5-6: the reservation stays while a holder (registrant) is left, and goes with the last one.
TEST(ReservationUnregisterHolderTest, AnAllRegistrantsReservationGoesWithTheLastRegistrant) {
  for (RT t : {RT::write_exclusive_all_registrants, RT::exclusive_access_all_registrants}) {
    ReservationState s = held_by_a(t);
    EXPECT_TRUE(unregister(s, kA, 1).ok());
    EXPECT_EQ(s.type, t);
    EXPECT_TRUE(unregister(s, kB, 2).ok());
    EXPECT_EQ(s.type, t);
    const Outcome out = unregister(s, kC, 3);
    EXPECT_TRUE(out.ok());
    EXPECT_EQ(s.type, RT::none);
    EXPECT_TRUE(out.notices.empty());
  }
}

// ---- Acquire --------------------------------------------------------------------------------------------------

TEST(ReservationAcquireTest, AcquireCreatesTheReservationWithoutCountingTheGeneration) {
  for (RT t : kAllTypes) {
    ReservationState s = three_registrants();
    const Outcome out = acquire(s, kB, 2, t);
    EXPECT_TRUE(out.ok());
    EXPECT_TRUE(out.changed);
    EXPECT_TRUE(out.notices.empty());
    EXPECT_EQ(s.type, t);
    EXPECT_EQ(s.generation, 0u) << "GEN does not count Acquire";
    EXPECT_TRUE(holds_reservation(s, kB));
    EXPECT_EQ(holds_reservation(s, kA), all_registrants_type(t));
    EXPECT_EQ(s.holder, all_registrants_type(t) ? HostId{} : kB);
  }
}

TEST(ReservationAcquireTest, AcquireNeedsARegistrationAndItsKey) {
  ReservationState s = three_registrants();
  expect_rejected(
      s, [](ReservationState& x) { return acquire(x, kD, 0, RT::write_exclusive); }, st::reservation_conflict);
  expect_rejected(
      s, [](ReservationState& x) { return acquire(x, kA, 2, RT::write_exclusive); }, st::reservation_conflict);
}

TEST(ReservationAcquireTest, TheHolderAcquiringTheSameTypeChangesNothingAnotherTypeIsAConflict) {
  ReservationState s = held_by_a(RT::write_exclusive);
  const ReservationState before = s;
  const Outcome same = acquire(s, kA, 1, RT::write_exclusive);
  EXPECT_TRUE(same.ok());
  EXPECT_FALSE(same.changed);
  EXPECT_EQ(s, before);
  expect_rejected(
      s, [](ReservationState& x) { return acquire(x, kA, 1, RT::exclusive_access); }, st::reservation_conflict);
}

TEST(ReservationAcquireTest, AcquireWhileAnotherHostHoldsIsAConflict) {
  for (RT t : kAllTypes) {
    ReservationState s = held_by_a(t);
    if (all_registrants_type(t)) {  // B is a holder too: the same type is processed, another one is not
      EXPECT_TRUE(acquire(s, kB, 2, t).ok());
      expect_rejected(
          s, [](ReservationState& x) { return acquire(x, kB, 2, RT::write_exclusive); }, st::reservation_conflict);
    } else {
      const ReservationState before = s;
      EXPECT_EQ(acquire(s, kB, 2, t).status, st::reservation_conflict);
      EXPECT_EQ(s, before);
    }
  }
}

// SPDK accepts a reserved type; the specification reserves 0h and 07h-FFh.
TEST(ReservationAcquireTest, SpdkDepartureReservedTypeIsInvalidField) {
  for (unsigned rtype : {0u, 7u, 8u, 0x80u, 0xFFu}) {
    for (uint8_t action = 0; action <= 2; ++action) {
      ReservationState s = three_registrants();
      const ReservationState before = s;
      const Outcome out = reservation_acquire(s, kA, {action, false, static_cast<uint8_t>(rtype), 1, 2});
      EXPECT_EQ(out.status, st::invalid_field) << "rtype " << rtype << " action " << int{action};
      EXPECT_EQ(s, before);
    }
  }
}

// IEKEY in Acquire and Release: "the controller shall return an error of Invalid Field in Command".
TEST(ReservationAcquireTest, IekeyAndReservedActionsAreInvalidField) {
  ReservationState s = held_by_a(RT::write_exclusive);
  const ReservationState before = s;
  EXPECT_EQ(reservation_acquire(s, kA, {0, true, 1, 1, 0}).status, st::invalid_field);
  EXPECT_EQ(reservation_acquire(s, kB, {1, true, 1, 2, 1}).status, st::invalid_field);
  EXPECT_EQ(reservation_release(s, kA, {0, true, 1, 1}).status, st::invalid_field);
  EXPECT_EQ(reservation_release(s, kA, {1, true, 0, 1}).status, st::invalid_field);
  for (uint8_t a = 3; a <= 7; ++a) EXPECT_EQ(reservation_acquire(s, kA, {a, false, 1, 1, 0}).status, st::invalid_field);
  for (uint8_t a = 2; a <= 7; ++a) EXPECT_EQ(reservation_release(s, kA, {a, false, 1, 1}).status, st::invalid_field);
  EXPECT_EQ(s, before);
}

// ---- Preempt ("Preempting a Reservation or Registration") --------------------------------------------------

// PRKEY is the holder's key: its registrants are unregistered and the issuer holds a new reservation of RTYPE.
TEST(ReservationPreemptTest, PreemptingTheHolderTakesTheReservation) {
  ReservationState s = held_by_a(RT::write_exclusive);
  const Outcome out = preempt(s, kB, 2, 1, RT::exclusive_access);
  EXPECT_TRUE(out.ok());
  EXPECT_EQ(s.type, RT::exclusive_access);
  EXPECT_EQ(s.holder, kB);
  EXPECT_EQ(find_registrant(s, kA), nullptr);
  EXPECT_EQ(s.generation, 1u);
  // A lost its registration; C, still a registrant, sees the type change; B issued it and hears nothing.
  EXPECT_EQ(out.notices, (std::vector<Notice>{{kA, RN::registration_preempted}, {kC, RN::reservation_released}}));
  EXPECT_TRUE(out.abort_hosts.empty()) << "Preempt, not Preempt and Abort";
}

TEST(ReservationPreemptTest, PreemptingTheHolderWithItsTypeNotifiesNoRelease) {
  ReservationState s = held_by_a(RT::write_exclusive);
  const Outcome out = preempt(s, kB, 2, 1, RT::write_exclusive);
  EXPECT_TRUE(out.ok());
  EXPECT_EQ(s.holder, kB);
  EXPECT_EQ(out.notices, (std::vector<Notice>{{kA, RN::registration_preempted}}));
}

// "all registrants with a matching reservation key other than the host that issued the command are unregistered"
TEST(ReservationPreemptTest, EveryRegistrantWithTheHoldersKeyButTheIssuerIsUnregistered) {
  ReservationState s;
  EXPECT_TRUE(do_register(s, kA, 5).ok());
  EXPECT_TRUE(do_register(s, kB, 5).ok());
  EXPECT_TRUE(do_register(s, kC, 5).ok());
  EXPECT_TRUE(do_register(s, kD, 6).ok());
  EXPECT_TRUE(acquire(s, kA, 5, RT::write_exclusive_registrants_only).ok());
  const Outcome out = preempt(s, kB, 5, 5, RT::write_exclusive_registrants_only);
  EXPECT_TRUE(out.ok());
  EXPECT_EQ(s.registrants, (std::vector<Registrant>{{kB, 5}, {kD, 6}}));
  EXPECT_EQ(s.holder, kB);
  EXPECT_EQ(out.notices, (std::vector<Notice>{{kA, RN::registration_preempted}, {kC, RN::registration_preempted}}));
}

// "a reservation holder may preempt itself": registration kept, reservation re-created with the new type.
TEST(ReservationPreemptTest, TheHolderPreemptsItselfToChangeTheType) {
  ReservationState s = held_by_a(RT::write_exclusive);
  const Outcome out = preempt(s, kA, 1, 1, RT::exclusive_access_registrants_only);
  EXPECT_TRUE(out.ok());
  EXPECT_EQ(s.type, RT::exclusive_access_registrants_only);
  EXPECT_EQ(s.holder, kA);
  EXPECT_EQ(s.registrants.size(), 3u);
  EXPECT_EQ(out.notices, (std::vector<Notice>{{kB, RN::reservation_released}, {kC, RN::reservation_released}}));
  EXPECT_EQ(s.generation, 1u);
}

// PRKEY neither the holder's nor 0: those registrants go, the reservation stays.
TEST(ReservationPreemptTest, PreemptingAnotherKeyUnregistersOnlyItsRegistrants) {
  ReservationState s = held_by_a(RT::exclusive_access);
  const Outcome out = preempt(s, kB, 2, 3, RT::write_exclusive);
  EXPECT_TRUE(out.ok());
  EXPECT_EQ(s.type, RT::exclusive_access);
  EXPECT_EQ(s.holder, kA);
  EXPECT_EQ(find_registrant(s, kC), nullptr);
  EXPECT_EQ(out.notices, (std::vector<Notice>{{kC, RN::registration_preempted}}));
  EXPECT_EQ(s.generation, 1u);
}

TEST(ReservationPreemptTest, PrkeyZeroThatIsNotTheHoldersIsInvalidField) {
  ReservationState s = held_by_a(RT::write_exclusive);
  expect_rejected(
      s, [](ReservationState& x) { return preempt(x, kB, 2, 0, RT::write_exclusive); }, st::invalid_field);
  // A holder whose key is 0 is preempted with PRKEY 0.
  ReservationState z;
  EXPECT_TRUE(do_register(z, kA, 0).ok());
  EXPECT_TRUE(do_register(z, kB, 2).ok());
  EXPECT_TRUE(acquire(z, kA, 0, RT::write_exclusive).ok());
  EXPECT_TRUE(preempt(z, kB, 2, 0, RT::write_exclusive).ok());
  EXPECT_EQ(z.holder, kB);
  EXPECT_EQ(find_registrant(z, kA), nullptr);
}

// All registrants, PRKEY 0: every other registrant goes and the issuer holds a new reservation of RTYPE.
TEST(ReservationPreemptTest, AllRegistrantsPrkeyZeroUnregistersEveryOther) {
  for (RT t : {RT::write_exclusive_all_registrants, RT::exclusive_access_all_registrants}) {
    ReservationState s = held_by_a(t);
    const Outcome out = preempt(s, kB, 2, 0, RT::write_exclusive);
    EXPECT_TRUE(out.ok());
    EXPECT_EQ(s.registrants, (std::vector<Registrant>{{kB, 2}}));
    EXPECT_EQ(s.type, RT::write_exclusive);
    EXPECT_EQ(s.holder, kB);
    EXPECT_EQ(out.notices, (std::vector<Notice>{{kA, RN::registration_preempted}, {kC, RN::registration_preempted}}));
  }
}

// All registrants, PRKEY non-zero: the registrants with that key go; none with it is a conflict.
TEST(ReservationPreemptTest, AllRegistrantsPrkeyUnregistersItsRegistrantsOrConflicts) {
  ReservationState s = held_by_a(RT::exclusive_access_all_registrants);
  expect_rejected(
      s, [](ReservationState& x) { return preempt(x, kB, 2, 9, RT::write_exclusive); }, st::reservation_conflict);
  const Outcome out = preempt(s, kB, 2, 3, RT::write_exclusive);
  EXPECT_TRUE(out.ok());
  EXPECT_EQ(s.type, RT::exclusive_access_all_registrants) << "the reservation stays";
  EXPECT_EQ(s.registrants, (std::vector<Registrant>{{kA, 1}, {kB, 2}}));
  EXPECT_EQ(out.notices, (std::vector<Notice>{{kC, RN::registration_preempted}}));
}

// The last holders of an all-registrants reservation preempted (the issuer among them): the reservation goes.
TEST(ReservationPreemptTest, AllRegistrantsPreemptingEveryoneReleasesTheReservation) {
  ReservationState s;
  EXPECT_TRUE(do_register(s, kA, 7).ok());
  EXPECT_TRUE(do_register(s, kB, 7).ok());
  EXPECT_TRUE(acquire(s, kA, 7, RT::write_exclusive_all_registrants).ok());
  const Outcome out = preempt(s, kB, 7, 7, RT::write_exclusive);
  EXPECT_TRUE(out.ok());
  EXPECT_TRUE(s.registrants.empty());
  EXPECT_EQ(s.type, RT::none);
  EXPECT_EQ(out.notices, (std::vector<Notice>{{kA, RN::registration_preempted}}));
}

// No reservation: the registrants with PRKEY are unregistered, the issuer too if its key matches (without a
// notice), and a PRKEY nobody has changes nothing but still completes successfully.
TEST(ReservationPreemptTest, WithoutAReservationPreemptOnlyUnregisters) {
  ReservationState s;
  EXPECT_TRUE(do_register(s, kA, 1).ok());
  EXPECT_TRUE(do_register(s, kB, 1).ok());
  EXPECT_TRUE(do_register(s, kC, 3).ok());
  s.generation = 0;
  Outcome out = preempt(s, kC, 3, 1, RT::write_exclusive);
  EXPECT_TRUE(out.ok());
  EXPECT_EQ(s.type, RT::none) << "nothing to preempt: no reservation is created";
  EXPECT_EQ(s.registrants, (std::vector<Registrant>{{kC, 3}}));
  EXPECT_EQ(out.notices, (std::vector<Notice>{{kA, RN::registration_preempted}, {kB, RN::registration_preempted}}));
  out = preempt(s, kC, 3, 42, RT::write_exclusive);
  EXPECT_TRUE(out.ok());
  EXPECT_TRUE(out.notices.empty());
  out = preempt(s, kC, 3, 3, RT::write_exclusive, /*abort=*/true);
  EXPECT_TRUE(out.ok());
  EXPECT_TRUE(s.registrants.empty());
  EXPECT_TRUE(out.notices.empty());
  EXPECT_TRUE(out.abort_hosts.empty()) << "the issuer's own commands are not aborted";
  EXPECT_EQ(s.generation, 3u);
}

TEST(ReservationPreemptTest, PreemptNeedsARegistrationAndItsKey) {
  ReservationState s = held_by_a(RT::write_exclusive);
  expect_rejected(
      s, [](ReservationState& x) { return preempt(x, kD, 0, 1, RT::write_exclusive); }, st::reservation_conflict);
  expect_rejected(
      s, [](ReservationState& x) { return preempt(x, kB, 1, 1, RT::write_exclusive); }, st::reservation_conflict);
}

// SPDK refuses Preempt and Abort. Here it preempts exactly as Preempt does and names the hosts whose commands
// the core aborts: those it unregistered, the issuer excepted.
TEST(ReservationPreemptTest, SpdkDeparturePreemptAndAbortIsAcceptedAndNamesTheHostsToAbort) {
  ReservationState s = held_by_a(RT::exclusive_access);
  ReservationState plain = s;
  const Outcome out = preempt(s, kB, 2, 1, RT::exclusive_access, /*abort=*/true);
  const Outcome same = preempt(plain, kB, 2, 1, RT::exclusive_access, /*abort=*/false);
  EXPECT_TRUE(out.ok());
  EXPECT_EQ(s, plain);
  EXPECT_EQ(out.notices, same.notices);
  EXPECT_EQ(out.abort_hosts, std::vector<HostId>{kA});
  EXPECT_TRUE(same.abort_hosts.empty());

  ReservationState all = held_by_a(RT::write_exclusive_all_registrants);
  const Outcome everyone = preempt(all, kC, 3, 0, RT::write_exclusive, true);
  EXPECT_EQ(everyone.abort_hosts, (std::vector<HostId>{kA, kB}));
}

// ---- the generation counter ------------------------------------------------------------------------------------

// SPDK counts registrants changed. GEN counts commands: each successful Register (any action), Clear, Preempt and
// Preempt and Abort once, whatever it changed; Acquire, Release, failures and Report not at all.
TEST(ReservationGenerationTest, SpdkDepartureGenerationCountsSuccessfulCommandsNotRegistrants) {
  ReservationState s;
  uint32_t want = 0;
  auto step = [&](const Outcome& out, bool counts) {
    if (counts) ++want;
    EXPECT_EQ(s.generation, want);
    return out.ok();
  };
  EXPECT_TRUE(step(do_register(s, kA, 1), true));
  EXPECT_TRUE(step(do_register(s, kB, 2), true));
  EXPECT_TRUE(step(do_register(s, kC, 2), true));
  EXPECT_TRUE(step(do_register(s, kA, 1), true));  // no registration changed
  EXPECT_FALSE(step(do_register(s, kA, 9), false));
  EXPECT_TRUE(step(replace(s, kA, 1, 11), true));
  EXPECT_TRUE(step(acquire(s, kA, 11, RT::write_exclusive), false));
  EXPECT_TRUE(step(preempt(s, kA, 11, 2, RT::write_exclusive), true));  // two registrants removed: counts once
  EXPECT_TRUE(step(do_register(s, kB, 2), true));
  EXPECT_TRUE(step(preempt(s, kA, 11, 99, RT::write_exclusive), true));  // removed nobody: still counts
  EXPECT_FALSE(step(preempt(s, kB, 2, 0, RT::write_exclusive), false));
  EXPECT_TRUE(step(release(s, kA, 11, RT::write_exclusive), false));
  EXPECT_TRUE(step(clear(s, kB, 2), true));
  EXPECT_TRUE(step(do_register(s, kA, 1), true));
  EXPECT_TRUE(step(unregister(s, kA, 1), true));
}

// "If the value of this field is FFFFFFFFh, then the field shall be cleared to 0h when incremented".
TEST(ReservationGenerationTest, TheGenerationRollsOverToZero) {
  ReservationState s;
  s.generation = 0xFFFFFFFF;
  EXPECT_TRUE(do_register(s, kA, 1).ok());
  EXPECT_EQ(s.generation, 0u);
}

// ---- Release and Clear ----------------------------------------------------------------------------------------

class ReleaseTest : public ::testing::TestWithParam<RT> {};

// Released by a holder; the other registrants hear of it unless the type is Write Exclusive or Exclusive Access.
TEST_P(ReleaseTest, TheHolderReleasesAndOthersAreNotifiedForTypes3To6) {
  const RT t = GetParam();
  ReservationState s = held_by_a(t);
  const Outcome out = release(s, kA, 1, t);
  EXPECT_TRUE(out.ok());
  EXPECT_TRUE(out.changed);
  EXPECT_EQ(s.type, RT::none);
  EXPECT_EQ(s.registrants.size(), 3u);
  EXPECT_EQ(s.generation, 0u);
  const bool notifies = t != RT::write_exclusive && t != RT::exclusive_access;
  EXPECT_EQ(out.notices, notifies
                             ? (std::vector<Notice>{{kB, RN::reservation_released}, {kC, RN::reservation_released}})
                             : std::vector<Notice>{});
}

// A holder naming another type, a reserved one included, gets Invalid Field.
TEST_P(ReleaseTest, TheHolderNamingAnotherTypeIsInvalidField) {
  const RT t = GetParam();
  for (unsigned other : {0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u, 0xFFu}) {
    if (other == static_cast<unsigned>(t)) continue;
    ReservationState s = held_by_a(t);
    const ReservationState before = s;
    EXPECT_EQ(reservation_release(s, kA, {0, false, static_cast<uint8_t>(other), 1}).status, st::invalid_field)
        << other;
    EXPECT_EQ(s, before);
  }
}

// "An attempt by a registrant to release a reservation ... when the host is not the reservation holder shall
// cause the command to complete successfully, but shall have no effect" (with types 5-6 every registrant holds).
TEST_P(ReleaseTest, ARegistrantThatHoldsNothingReleasesNothing) {
  const RT t = GetParam();
  ReservationState s = held_by_a(t);
  const ReservationState before = s;
  const Outcome out = release(s, kB, 2, RT::write_exclusive);
  if (all_registrants_type(t)) {
    EXPECT_EQ(out.status, st::invalid_field) << "B holds it, and names another type";
    const Outcome right = release(s, kB, 2, t);
    EXPECT_TRUE(right.ok());
    EXPECT_EQ(s.type, RT::none) << "one holder releases an all-registrants reservation for all";
    EXPECT_EQ(right.notices, (std::vector<Notice>{{kA, RN::reservation_released}, {kC, RN::reservation_released}}));
    return;
  }
  EXPECT_TRUE(out.ok());
  EXPECT_FALSE(out.changed);
  EXPECT_EQ(s, before);
  EXPECT_TRUE(reservation_release(s, kB, {0, false, 0, 2}).ok()) << "whatever the type, reserved ones included";
  EXPECT_EQ(s, before);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ReleaseTest, ::testing::ValuesIn(kAllTypes));

TEST(ReservationReleaseTest, ReleaseWithoutAReservationSucceedsWithoutEffect) {
  ReservationState s = three_registrants();
  const ReservationState before = s;
  const Outcome out = release(s, kA, 1, RT::write_exclusive);
  EXPECT_TRUE(out.ok());
  EXPECT_FALSE(out.changed);
  EXPECT_EQ(s, before);
}

TEST(ReservationReleaseTest, ReleaseAndClearNeedARegistrationAndItsKey) {
  ReservationState s = held_by_a(RT::write_exclusive);
  expect_rejected(
      s, [](ReservationState& x) { return release(x, kA, 2, RT::write_exclusive); }, st::reservation_conflict);
  expect_rejected(
      s, [](ReservationState& x) { return release(x, kD, 0, RT::write_exclusive); }, st::reservation_conflict);
  expect_rejected(
      s, [](ReservationState& x) { return clear(x, kB, 1); }, st::reservation_conflict);
  expect_rejected(
      s, [](ReservationState& x) { return clear(x, kD, 0); }, st::reservation_conflict);
}

// Clear: reservation released and every registrant unregistered; the others get Reservation Preempted.
TEST(ReservationReleaseTest, ClearUnregistersEveryoneAndNotifiesTheOthersPreempted) {
  ReservationState s = held_by_a(RT::exclusive_access_registrants_only);
  s.ptpl = true;
  const Outcome out = clear(s, kB, 2);
  EXPECT_TRUE(out.ok());
  EXPECT_TRUE(out.changed);
  EXPECT_EQ(s.type, RT::none);
  EXPECT_TRUE(s.registrants.empty());
  EXPECT_TRUE(s.ptpl) << "PTPL belongs to the namespace";
  EXPECT_EQ(s.generation, 1u);
  EXPECT_EQ(out.notices, (std::vector<Notice>{{kA, RN::reservation_preempted}, {kC, RN::reservation_preempted}}));
  EXPECT_TRUE(out.abort_hosts.empty());
}

TEST(ReservationPtplTest, SetFeaturesTurnsPtplOnAndOff) {
  ReservationState s = three_registrants();
  EXPECT_EQ(set_ptpl(s, true, false).status, st::invalid_field);
  EXPECT_FALSE(s.ptpl);
  Outcome out = set_ptpl(s, true, true);
  EXPECT_TRUE(out.ok());
  EXPECT_TRUE(out.changed);
  EXPECT_TRUE(s.ptpl);
  EXPECT_FALSE(set_ptpl(s, true, true).changed);
  out = set_ptpl(s, false, false);
  EXPECT_TRUE(out.ok());
  EXPECT_TRUE(out.changed);
  EXPECT_FALSE(s.ptpl);
  EXPECT_EQ(s.generation, 0u) << "not a Register";
}

}  // namespace
}  // namespace rdmablk::target::reservations::testing
