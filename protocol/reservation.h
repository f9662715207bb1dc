// Reservations (NVMe Base 2.0, 8.19 "Reservations" and 7.2-7.5 the four commands) and Copy (NVM Command
// Set 1.0, 3.3.1): the commands' dwords, the data they carry, the Reservation Status data structures of
// Reservation Report, the Reservation Notification log page (LID 80h) and the Copy source range entries.
// Wire layouts only; the rules live in target/reservations/.
#pragma once

#include "protocol/wire.h"
#include "protocol/command.h"

namespace rdmablk::protocol {

// Reservation types (Base 2.0 Figure 562, RTYPE). 0 in a Report: no reservation.
enum class ReservationType : uint8_t {
  none = 0,
  write_exclusive = 1,
  exclusive_access = 2,
  write_exclusive_registrants_only = 3,
  exclusive_access_registrants_only = 4,
  write_exclusive_all_registrants = 5,
  exclusive_access_all_registrants = 6,
};
constexpr bool valid_reservation_type(uint8_t t) noexcept { return t >= 1 && t <= 6; }

// Identify Namespace RESCAP (byte 31): the types supported, PTPL and IEKEY handling.
namespace rescap {
inline constexpr uint8_t kPersistThroughPowerLoss = 1u << 0;
inline constexpr uint8_t kWriteExclusive = 1u << 1;
inline constexpr uint8_t kExclusiveAccess = 1u << 2;
inline constexpr uint8_t kWriteExclusiveRegistrantsOnly = 1u << 3;
inline constexpr uint8_t kExclusiveAccessRegistrantsOnly = 1u << 4;
inline constexpr uint8_t kWriteExclusiveAllRegistrants = 1u << 5;
inline constexpr uint8_t kExclusiveAccessAllRegistrants = 1u << 6;
inline constexpr uint8_t kIgnoreExistingKey = 1u << 7;  // IEKEY as defined since NVMe 1.3
inline constexpr uint8_t kAll = 0xFF;
}  // namespace rescap

// Reservation Register (0Dh), CDW10 (Base 2.0 Figure 566).
enum class RegisterAction : uint8_t { register_key = 0, unregister_key = 1, replace_key = 2 };
// CPTPL: change the Persist Through Power Loss state.
enum class ChangePtpl : uint8_t { no_change = 0, reserved = 1, clear = 2, set = 3 };

struct ReservationRegisterCommand {
  SqeHeader hdr;               // 0
  le32 cdw10;                  // 40 RREGA 2:0, IEKEY 3, DISNSRS 4 (2.1), CPTPL 31:30
  std::array<le32, 5> rsvd11;  // 44 CDW11-15

  constexpr uint8_t action() const noexcept { return static_cast<uint8_t>(cdw10.get() & 0x7); }
  constexpr bool ignore_existing_key() const noexcept { return (cdw10.get() >> 3 & 1) != 0; }
  constexpr uint8_t cptpl() const noexcept { return static_cast<uint8_t>(cdw10.get() >> 30); }
  constexpr void set(RegisterAction a, bool iekey, ChangePtpl c) noexcept {
    cdw10.set(static_cast<uint32_t>(a) | (iekey ? 1u << 3 : 0u) | static_cast<uint32_t>(c) << 30);
  }
};
static_assert(sizeof(ReservationRegisterCommand) == 64);

// Its data: the current key (ignored for Register) and the new key.
struct ReservationRegisterData {
  le64 crkey;  // 0
  le64 nrkey;  // 8
};
static_assert(sizeof(ReservationRegisterData) == 16);

// Reservation Acquire and Release share their CDW10 layout; only the values of the action differ.
template <typename Action>
struct ReservationActionCommand {
  SqeHeader hdr;               // 0
  le32 cdw10;                  // 40 RACQA / RRELA 2:0, IEKEY 3, DISNSRS 4 (2.1), RTYPE 15:8
  std::array<le32, 5> rsvd11;  // 44

  constexpr uint8_t action() const noexcept { return static_cast<uint8_t>(cdw10.get() & 0x7); }
  constexpr bool ignore_existing_key() const noexcept { return (cdw10.get() >> 3 & 1) != 0; }
  constexpr uint8_t rtype() const noexcept { return static_cast<uint8_t>(cdw10.get() >> 8 & 0xFF); }
  constexpr void set(Action a, ReservationType t, bool iekey = false) noexcept {
    cdw10.set(static_cast<uint32_t>(a) | (iekey ? 1u << 3 : 0u) | uint32_t{static_cast<uint8_t>(t)} << 8);
  }
};

// Reservation Acquire (11h), CDW10 (Base 2.0 Figure 559).
enum class AcquireAction : uint8_t { acquire = 0, preempt = 1, preempt_and_abort = 2 };
using ReservationAcquireCommand = ReservationActionCommand<AcquireAction>;
static_assert(sizeof(ReservationAcquireCommand) == 64);

// Its data: the current key and, for the preempt actions, the key to preempt.
struct ReservationAcquireData {
  le64 crkey;  // 0
  le64 prkey;  // 8
};
static_assert(sizeof(ReservationAcquireData) == 16);

// Reservation Release (15h), CDW10 (Base 2.0 Figure 570).
enum class ReleaseAction : uint8_t { release = 0, clear = 1 };
using ReservationReleaseCommand = ReservationActionCommand<ReleaseAction>;
static_assert(sizeof(ReservationReleaseCommand) == 64);

// Its data: the current key.
struct ReservationReleaseData {
  le64 crkey;  // 0
};
static_assert(sizeof(ReservationReleaseData) == 8);

// Reservation Report (0Eh) (Base 2.0 Figure 573-574).
struct ReservationReportCommand {
  SqeHeader hdr;               // 0
  le32 cdw10;                  // 40 NUMD: dwords to transfer, 0-based
  le32 cdw11;                  // 44 EDS 0: the extended data structure (128-bit host identifiers)
  std::array<le32, 4> rsvd12;  // 48

  constexpr uint64_t data_length() const noexcept { return (uint64_t{cdw10.get()} + 1) * 4; }
  constexpr bool extended() const noexcept { return (cdw11.get() & 1) != 0; }
  constexpr void set(uint32_t bytes, bool eds) noexcept {
    cdw10.set(bytes / 4 - 1);
    cdw11.set(eds ? 1u : 0u);
  }
};
static_assert(sizeof(ReservationReportCommand) == 64);

// Reservation Status data structure (Figure 575): the header, then REGCTL Registered Controller entries.
struct ReservationStatusHeader {
  le32 gen;                      // 0  generation
  uint8_t rtype;                 // 4  ReservationType
  std::array<uint8_t, 2> regctl;  // 5  number of registered controllers (little endian, unaligned)
  std::array<uint8_t, 2> rsvd7;  // 7
  uint8_t ptpls;                 // 9  Persist Through Power Loss state
  std::array<uint8_t, 14> rsvd10;  // 10
};
static_assert(sizeof(ReservationStatusHeader) == 24);

// Registered Controller data structure (Figure 576): 64-bit host identifier.
struct RegisteredController {
  le16 cntlid;                   // 0  FFFFh: a registrant with no controller connected (or not reported)
  uint8_t rcsts;                 // 2  bit 0: holds the reservation
  std::array<uint8_t, 5> rsvd3;  // 3
  le64 hostid;                   // 8
  le64 rkey;                     // 16
};
static_assert(sizeof(RegisteredController) == 24);

// The extended forms (Figure 577-578): a 64-byte header and 64-byte entries with 128-bit host identifiers.
struct ReservationStatusExtHeader {
  ReservationStatusHeader h;       // 0
  std::array<uint8_t, 40> rsvd24;  // 24
};
static_assert(sizeof(ReservationStatusExtHeader) == 64);

struct RegisteredControllerExt {
  le16 cntlid;                      // 0
  uint8_t rcsts;                    // 2
  std::array<uint8_t, 5> rsvd3;     // 3
  le64 rkey;                        // 8
  std::array<uint8_t, 16> hostid;   // 16
  std::array<uint8_t, 32> rsvd32;   // 32
};
static_assert(sizeof(RegisteredControllerExt) == 64);
static_assert(offsetof(RegisteredControllerExt, hostid) == 16);

inline constexpr uint8_t kRcstsHoldsReservation = 1u << 0;
inline constexpr uint16_t kCntlidNone = 0xFFFF;  // a registrant whose host has no controller here

// Reservation Notification log page (LID 80h, Base 2.0 Figure 245): one entry per Get Log Page.
enum class ReservationNotice : uint8_t {
  empty = 0,
  registration_preempted = 1,
  reservation_released = 2,
  reservation_preempted = 3,
};

struct ReservationNotificationLog {
  le64 count;                      // 0  log page count: increments per notice, 0 never used after wrap
  uint8_t type;                    // 8  ReservationNotice
  uint8_t available;               // 9  notices still queued after this one (saturates at 255)
  std::array<uint8_t, 2> rsvd10;   // 10
  le32 nsid;                       // 12
  std::array<uint8_t, 48> rsvd16;  // 16
};
static_assert(sizeof(ReservationNotificationLog) == 64);

// Reservation Notification Mask feature (FID 82h) CDW11 bits: the notices a controller does not want.
namespace resv_mask {
inline constexpr uint32_t kRegistrationPreempted = 1u << 1;
inline constexpr uint32_t kReservationReleased = 1u << 2;
inline constexpr uint32_t kReservationPreempted = 1u << 3;
inline constexpr uint32_t kAll = kRegistrationPreempted | kReservationReleased | kReservationPreempted;
}  // namespace resv_mask

// Asynchronous event: I/O Command specific status (type 6), Reservation Log Page Available (info 0).
inline constexpr uint8_t kAenTypeIoCommandSpecific = 6;
inline constexpr uint8_t kAenInfoReservationLogAvailable = 0;

// Copy (19h) (NVM Command Set 1.0, 3.3.1, Figure 34-36).
struct CopyCommand {
  SqeHeader hdr;  // 0
  le64 sdlba;     // 40 CDW10-11 starting destination LBA
  le32 cdw12;     // 48 NR 7:0 (ranges, 0-based), DESFMT 11:8, PRINFOR 15:12, DTYPE 23:20, STCW 24,
                  //    PRINFOW 29:26, FUA 30, LR 31
  le32 cdw13;     // 52 DSPEC 31:16
  le32 cdw14;     // 56 LBTW / ILBRT
  le32 cdw15;     // 60 LBATW / LBATMW

  constexpr uint32_t range_count() const noexcept { return (cdw12.get() & 0xFF) + 1; }  // 1..256
  constexpr uint8_t descriptor_format() const noexcept { return static_cast<uint8_t>(cdw12.get() >> 8 & 0xF); }
  constexpr uint8_t prinfor() const noexcept { return static_cast<uint8_t>(cdw12.get() >> 12 & 0xF); }
  constexpr uint8_t prinfow() const noexcept { return static_cast<uint8_t>(cdw12.get() >> 26 & 0xF); }
  constexpr bool fua() const noexcept { return (cdw12.get() >> 30 & 1) != 0; }
  constexpr void set(uint64_t dest, uint32_t ranges, bool fua_on = false) noexcept {
    sdlba.set(dest);
    cdw12.set(((ranges - 1) & 0xFF) | (fua_on ? 1u << 30 : 0u));
  }
};
static_assert(sizeof(CopyCommand) == 64);

// Source Range Entry, Copy Descriptor Format 0 (Figure 37).
struct CopySourceRange {
  std::array<uint8_t, 8> rsvd0;  // 0
  le64 slba;                     // 8
  le16 nlb;                      // 16 0-based
  std::array<uint8_t, 6> rsvd18;  // 18
  le32 eilbrt;                   // 24 expected initial logical block reference tag
  le16 elbat;                    // 28
  le16 elbatm;                   // 30

  constexpr uint32_t block_count() const noexcept { return uint32_t{nlb.get()} + 1; }
};
static_assert(sizeof(CopySourceRange) == 32);
static_assert(offsetof(CopySourceRange, slba) == 8);
static_assert(offsetof(CopySourceRange, nlb) == 16);

}  // namespace rdmablk::protocol
