// The host side of shared volumes beyond IoQueue::submit_compare / submit_copy / submit_compare_and_write:
// Copy source range lists, and the four reservation commands (NVMe Base 2.0, 7.2-7.5) run synchronously on
// an I/O queue (they are NVM I/O commands, so they need one; IoQueue::execute, the same sync path as every
// other one-off command). Wire layouts are protocol/reservation.h's.
//
// Errors: an NVMe status other than success is an error that names the command and the status
// ("Reservation Acquire failed: Reservation Conflict (SCT 0x0 SC 0x83, DNR)"), as IoQueue::execute words it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "initiator/host/controller.h"
#include "protocol/reservation.h"
#include "protocol/result.h"

namespace rdmablk::initiator {

// ---------------------------------------------------------------------------------------------------------
// Copy
// ---------------------------------------------------------------------------------------------------------

struct CopyRange {
  uint64_t slba = 0;
  uint32_t blocks = 0;  // 1..65536
};

// Source range entries, descriptor format 0 (32 bytes each), for IoQueue::submit_copy. 1..256 ranges.
Result<std::vector<uint8_t>> encode_copy_ranges(std::span<const CopyRange> ranges);

// The Copy command for `ranges` (1..256) format 0 entries, as IoQueue::submit_copy sends it.
protocol::Sqe make_copy(uint32_t nsid, uint64_t sdlba, uint32_t ranges, bool fua) noexcept;

// Synchronous Compare and Copy (tools, the CLI): a miscompare is an error naming Compare Failure.
Result<void> compare_blocks(IoQueue& q, uint32_t nsid, uint64_t slba, uint32_t blocks, std::span<uint8_t> data);
Result<void> copy_blocks(IoQueue& q, uint32_t nsid, uint64_t sdlba, std::span<const CopyRange> ranges,
                         bool fua = false);

// ---------------------------------------------------------------------------------------------------------
// Reservations
// ---------------------------------------------------------------------------------------------------------

// The commands as they go on the wire (PSDT SGL, no CID yet); exposed for tests.
protocol::Sqe make_reservation_register(uint32_t nsid, protocol::RegisterAction action, bool iekey,
                                        protocol::ChangePtpl cptpl) noexcept;
protocol::Sqe make_reservation_acquire(uint32_t nsid, protocol::AcquireAction action, bool iekey,
                                       protocol::ReservationType rtype) noexcept;
protocol::Sqe make_reservation_release(uint32_t nsid, protocol::ReleaseAction action, bool iekey,
                                       protocol::ReservationType rtype) noexcept;
// `bytes`: a multiple of 4, at least the header (24 bytes, 64 with `eds`).
protocol::Sqe make_reservation_report(uint32_t nsid, bool eds, uint32_t bytes) noexcept;

// One Registered Controller entry of a Reservation Report.
struct Registrant {
  uint16_t cntlid = 0;  // FFFFh: the registrant's host has no controller here
  uint8_t rcsts = 0;    // bit 0: holds the reservation
  // The host identifier: the 128-bit one with EDS; without, the 64-bit one in bytes 0-7 (as on the wire,
  // little endian) and zeroes after it.
  std::array<uint8_t, 16> hostid{};
  uint64_t rkey = 0;

  bool holds_reservation() const noexcept { return (rcsts & protocol::kRcstsHoldsReservation) != 0; }
  uint64_t hostid64() const noexcept;  // the 64-bit form (EDS clear)
};

// A parsed Reservation Status data structure.
struct ReservationStatus {
  uint32_t generation = 0;
  uint8_t rtype = 0;    // protocol::ReservationType; 0: not reserved
  uint16_t regctl = 0;  // registrants the controller counts
  uint8_t ptpls = 0;    // Persist Through Power Loss state
  bool extended = false;  // EDS: 64-byte header and entries, 128-bit host identifiers
  std::vector<Registrant> registrants;  // those that fit in the data read (up to regctl)

  // The data read was too short for every registrant: read again with more bytes.
  bool truncated() const noexcept { return registrants.size() < regctl; }
};

// Parses what a Reservation Report returned (`data`: the bytes transferred). Fewer bytes than the header
// is an error; entries cut off by the end of the data are left out (truncated() says so).
Result<ReservationStatus> parse_reservation_report(std::span<const uint8_t> data, bool extended);

// The synchronous commands, on an I/O queue of the controller. Keys are host order.
Result<void> reservation_register(IoQueue& q, uint32_t nsid, protocol::RegisterAction action, bool iekey,
                                  protocol::ChangePtpl cptpl, uint64_t crkey, uint64_t nrkey);
Result<void> reservation_acquire(IoQueue& q, uint32_t nsid, protocol::AcquireAction action, bool iekey,
                                 protocol::ReservationType rtype, uint64_t crkey, uint64_t prkey);
Result<void> reservation_release(IoQueue& q, uint32_t nsid, protocol::ReleaseAction action, bool iekey,
                                 protocol::ReservationType rtype, uint64_t crkey);
// Reads `bytes` (a multiple of 4, at least the header) of the Reservation Status data structure: as
// transferred, or parsed.
Result<std::vector<uint8_t>> reservation_report_data(IoQueue& q, uint32_t nsid, bool eds, uint32_t bytes = 4096);
Result<ReservationStatus> reservation_report(IoQueue& q, uint32_t nsid, bool eds, uint32_t bytes = 4096);

}  // namespace rdmablk::initiator
