// Helpers of the reservation model's tests (test_reservation_model.cpp, test_reservation_report.cpp): hosts,
// the four commands in one call each, and a readable Status in failure messages.
#pragma once

#include <gtest/gtest.h>

#include <ostream>

#include "protocol/reservation.h"
#include "protocol/status.h"
#include "target/reservations/reservation_model.h"

namespace rdmablk::protocol {
// gtest prints a Status by its name rather than its bytes.
inline void PrintTo(Status s, std::ostream* os) { *os << status_name(s); }
}  // namespace rdmablk::protocol

namespace rdmablk::target::reservations::testing {

namespace st = protocol::status;
using protocol::ChangePtpl;
using RT = ReservationType;
using RN = ReservationNotice;

inline HostId host(uint8_t n) {
  HostId h{};
  h[0] = n;
  h[15] = static_cast<uint8_t>(~n);
  return h;
}
inline const HostId kA = host(0xA);
inline const HostId kB = host(0xB);
inline const HostId kC = host(0xC);
inline const HostId kD = host(0xD);

inline constexpr RT kAllTypes[] = {RT::write_exclusive,
                                   RT::exclusive_access,
                                   RT::write_exclusive_registrants_only,
                                   RT::exclusive_access_registrants_only,
                                   RT::write_exclusive_all_registrants,
                                   RT::exclusive_access_all_registrants};

inline Outcome do_register(ReservationState& s, const HostId& h, uint64_t key, ChangePtpl c = ChangePtpl::no_change) {
  return reservation_register(s, h, {0, false, static_cast<uint8_t>(c), 0, key}, true);
}
inline Outcome unregister(ReservationState& s, const HostId& h, uint64_t crkey, bool iekey = false) {
  return reservation_register(s, h, {1, iekey, 0, crkey, 0}, true);
}
inline Outcome replace(ReservationState& s, const HostId& h, uint64_t crkey, uint64_t nrkey, bool iekey = false) {
  return reservation_register(s, h, {2, iekey, 0, crkey, nrkey}, true);
}
inline Outcome acquire(ReservationState& s, const HostId& h, uint64_t crkey, RT t) {
  return reservation_acquire(s, h, {0, false, static_cast<uint8_t>(t), crkey, 0});
}
inline Outcome preempt(ReservationState& s, const HostId& h, uint64_t crkey, uint64_t prkey, RT t, bool abort = false) {
  return reservation_acquire(s, h, {static_cast<uint8_t>(abort ? 2 : 1), false, static_cast<uint8_t>(t), crkey, prkey});
}
inline Outcome release(ReservationState& s, const HostId& h, uint64_t crkey, RT t) {
  return reservation_release(s, h, {0, false, static_cast<uint8_t>(t), crkey});
}
inline Outcome clear(ReservationState& s, const HostId& h, uint64_t crkey) {
  return reservation_release(s, h, {1, false, 0, crkey});
}

// A, B, C registered with keys 1, 2, 3; generation reset so each test counts from 0.
inline ReservationState three_registrants() {
  ReservationState s;
  EXPECT_TRUE(do_register(s, kA, 1).ok());
  EXPECT_TRUE(do_register(s, kB, 2).ok());
  EXPECT_TRUE(do_register(s, kC, 3).ok());
  s.generation = 0;
  return s;
}

// ... and A holding a reservation of type t.
inline ReservationState held_by_a(RT t) {
  ReservationState s = three_registrants();
  EXPECT_TRUE(acquire(s, kA, 1, t).ok());
  return s;
}

}  // namespace rdmablk::target::reservations::testing
