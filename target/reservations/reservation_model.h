// The persistent-reservation model of one namespace: its state and the rules of the four reservation
// commands (NVMe Base 2.0, 8.19 "Reservations"; 7.2 Reservation Acquire, 7.3 Register, 7.4 Release, 7.5
// Report). The rules were read in Base 2.1/2.2 (8.1.22 "Reservations", 7.5-7.8), which restate 2.0 with one
// change this model follows: the Report has one entry per registrant (REGSTRNT) where 2.0 had one per
// controller of a registrant (REGCTL); see build_report().
//
// Pure: a ReservationState and functions that check or change it. No locks, no I/O, no controllers: the
// core runs the commands of one namespace one at a time, sends the notices to the controllers of each host
// named (masks, log pages, AENs), aborts the commands of the hosts a Preempt and Abort names, and saves the
// state (ptpl_store.h) after a command that changed it.
//
// Registrations belong to a HOST IDENTIFIER, 128 bits as fabrics always uses them ("Registering": a host
// that is a registrant may use any controller associated with it), so two controllers of one host share a
// registration and its rights. The model gives no meaning to a zero host identifier; whether a host without
// one may use reservations is the core's to decide (Base 2.1: Host Identifier Not Initialized).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "protocol/reservation.h"
#include "protocol/status.h"

namespace rdmablk::target::reservations {

using HostId = std::array<uint8_t, 16>;
using protocol::ReservationNotice;
using protocol::ReservationType;

// REGSTRNT, the Report's registrant count, is 16 bits: the most registrants a namespace can report.
inline constexpr std::size_t kMaxRegistrants = 0xFFFF;

struct Registrant {
  HostId host{};
  uint64_t key = 0;
  friend bool operator==(const Registrant&, const Registrant&) = default;
};

struct ReservationState {
  uint32_t generation = 0;  // PRGENERATION (the Report's GEN): wraps FFFFFFFFh -> 0
  ReservationType type = ReservationType::none;
  HostId holder{};  // the holder of a type 1-4 reservation; zero otherwise (types 5-6: every registrant holds it)
  bool ptpl = false;  // Persist Through Power Loss state
  std::vector<Registrant> registrants;  // in registration order, one per host
  friend bool operator==(const ReservationState&, const ReservationState&) = default;
};

// Write Exclusive / Exclusive Access - All Registrants (5, 6): every registrant is a reservation holder
// (Figure "Command Behavior in the Presence of a Reservation", "Reservation Holder Definition").
constexpr bool all_registrants_type(ReservationType t) noexcept {
  return t == ReservationType::write_exclusive_all_registrants ||
         t == ReservationType::exclusive_access_all_registrants;
}

const Registrant* find_registrant(const ReservationState& state, const HostId& host) noexcept;
// Whether `host` is a reservation holder: the holder of a type 1-4 reservation, any registrant of a 5-6 one.
bool holds_reservation(const ReservationState& state, const HostId& host) noexcept;
// What is wrong with a state no command sequence can produce (a type 1-4 holder that is not a registrant, a
// 5-6 reservation without registrants, a host registered twice, an unknown type...); nullopt when it is
// consistent. The state file parser rejects such states.
std::optional<std::string> inconsistency(const ReservationState& state);

// ---- access check (Base 2.0 8.19, Figure "Command Behavior in the Presence of a Reservation"; NVM Command Set
// 1.0 5.5 Figure 136 for the NVM commands) -------------------------------------------------------------------

// What a command does to the namespace's data, for the check. The NVM Command Set figure puts Compare, Read
// and Verify in the Read Command Group; Write, Write Uncorrectable, Write Zeroes and Dataset Management (any
// attribute) in the Write Command Group, and the Base figure adds Flush to it; Copy has its own group with
// the Write group's entries (Base 2.1: its source checked as a read and its destination as a write, the same
// answer for one namespace since every row that allows a write allows a read). The reservation commands have
// their own rules (the functions below) and every other command is allowed.
enum class Access : uint8_t { none = 0, read = 1, write = 2 };
Access io_access(uint8_t io_opcode) noexcept;

// Success, or Reservation Conflict where the figure says C. The core checks a command when it starts it, and
// a command that passed is never aborted by a reservation taken later ("A command is checked for reservation
// conflict at the time that the controller begins processing that command").
//
//                          holder   registrant   non-registrant
//   1 Write Exclusive        R W      R            R
//   2 Exclusive Access       R W      -            -
//   3 WE - Registrants Only  R W      R W          R
//   4 EA - Registrants Only  R W      R W          -
//   5 WE - All Registrants   R W      (holder)     R
//   6 EA - All Registrants   R W      (holder)     -
protocol::Status check_access(const ReservationState& state, const HostId& host, Access access) noexcept;

// ---- the mutating commands ----------------------------------------------------------------------------------

// A reservation notification for every controller of `host` attached to the namespace (Base 2.0 8.19,
// "Reservation Notifications"); the core applies each controller's Reservation Notification Mask.
struct Notice {
  HostId host{};
  ReservationNotice type = ReservationNotice::empty;
  friend bool operator==(const Notice&, const Notice&) = default;
};

struct Outcome {
  protocol::Status status = protocol::status::success;
  // The state changed (the generation counts): save it (ReservationStore::save). Never set on failure,
  // which leaves the state as it was.
  bool changed = false;
  std::vector<Notice> notices;
  // Preempt and Abort only: the hosts whose registration the command removed, the issuing host excepted. The
  // core aborts (or waits out) their commands to this namespace on all their controllers, and completes the
  // Acquire only after those complete ("Preempting a Reservation or Registration"). The issuing host is left
  // out: its own Acquire is among its outstanding commands and cannot wait for itself.
  std::vector<HostId> abort_hosts;
  bool ok() const noexcept { return status.ok(); }
};

// The decoded fields of each command: CDW10 as sent (reserved values are the model's to reject) and the keys
// of its data.
struct RegisterRequest {
  uint8_t action = 0;  // RREGA, protocol::RegisterAction
  bool iekey = false;
  uint8_t cptpl = 0;  // protocol::ChangePtpl
  uint64_t crkey = 0;
  uint64_t nrkey = 0;
  static RegisterRequest from(const protocol::ReservationRegisterCommand& cmd,
                              const protocol::ReservationRegisterData& data) noexcept;
};

struct AcquireRequest {
  uint8_t action = 0;  // RACQA, protocol::AcquireAction
  bool iekey = false;
  uint8_t rtype = 0;
  uint64_t crkey = 0;
  uint64_t prkey = 0;
  static AcquireRequest from(const protocol::ReservationAcquireCommand& cmd,
                             const protocol::ReservationAcquireData& data) noexcept;
};

struct ReleaseRequest {
  uint8_t action = 0;  // RRELA, protocol::ReleaseAction
  bool iekey = false;
  uint8_t rtype = 0;
  uint64_t crkey = 0;
  static ReleaseRequest from(const protocol::ReservationReleaseCommand& cmd,
                             const protocol::ReservationReleaseData& data) noexcept;
};

// Reservation Register from `host`. `ptpl_supported`: the namespace can persist its state (RESCAP bit 0);
// CPTPL 11b is Invalid Field without it. Register with the key already registered succeeds and changes no
// registration, but counts in the generation like every successful Register (GEN, Reservation Report).
Outcome reservation_register(ReservationState& state, const HostId& host, const RegisterRequest& req,
                             bool ptpl_supported);
// Reservation Acquire from `host`: acquire, preempt, preempt and abort.
Outcome reservation_acquire(ReservationState& state, const HostId& host, const AcquireRequest& req);
// Reservation Release from `host`: release, clear.
Outcome reservation_release(ReservationState& state, const HostId& host, const ReleaseRequest& req);
// Set Features Reservation Persistence (FID 83h): PTPL on or off. Invalid Field turning it on without
// `ptpl_supported`. Not a Register: the generation does not count it.
Outcome set_ptpl(ReservationState& state, bool ptpl, bool ptpl_supported);

// ---- Reservation Report -------------------------------------------------------------------------------------

// A controller that can access the namespace, and its host.
struct ControllerOfHost {
  HostId host{};
  uint16_t cntlid = 0;
};

// The Reservation Status Extended data structure (64-byte header, 64-byte entries with 128-bit host
// identifiers), cut to `max_bytes` (the command's NUMD length: "only that specified portion of the data
// structure is transferred"); the header always counts every registrant, so a host can size its next read.
//
// One entry per registrant, in registration order (Base 2.1: "a Registrant Extended data structure for each
// such registrant"; 2.0 had one per controller of a registered host, and 2.1 notes that 2.0 controllers may
// or may not report registrants with no controller). CNTLID: a controller of that host among `controllers`,
// the lowest when it has several; FFFFh when it has none ("not associated with any controller in the NVM
// subsystem"). RCSTS bit 0 on every holder: all registrants of a type 5-6 reservation.
//
// A host on fabrics always has a 128-bit Host Identifier, so EDS cleared is Host Identifier Inconsistent
// Format ("If a 128-bit Host Identifier has been specified and the Extended Data Structure bit is cleared to
// '0' ... the controller shall abort the command"), as nvmet answers too.
tl::expected<std::vector<uint8_t>, protocol::Status> build_report(const ReservationState& state,
                                                                  std::span<const ControllerOfHost> controllers,
                                                                  bool extended, uint64_t max_bytes);

}  // namespace rdmablk::target::reservations
