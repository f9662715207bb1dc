// The saved form of a ReservationState: bytes that say whether they are whole and intact. Pure (no I/O), so
// every store (a file per namespace, ptpl_store.h; a RADOS object for an RBD image, later) shares it.
//
// Little-endian throughout. The header is the same in every version, so any version can be told from
// garbage, torn or not:
//   0   8  magic "RBLKRESV"
//   8   4  version (1)
//   12  4  payload length: the bytes after the header
//   16  4  CRC32C (protocol/crc32c.h) of the whole file with this field zeroed
//   20  4  reserved, 0
// Version 1 payload (32 + 24 * count bytes):
//   0   4  generation
//   4   1  reservation type (0 none, 1-6)
//   5   1  flags: bit 0 PTPL
//   6   2  reserved, 0
//   8   16 holder host identifier (zero unless the type is 1-4)
//   24  4  count of registrants
//   28  4  reserved, 0
//   32  24 * count: host identifier (16), reservation key (8), in registration order
// Version 2 (only where a gateway group shares the state, namespace_reservations.h; a state without events is
// still written as version 1, so a file store never changes format): the version 1 payload, then
//   0   4  count of events (at most kMaxGroupEvents)
//   4   4  reserved, 0
//   8   24 * count: sequence number (4), notice type (1; 0: an abort), reserved (3), host identifier (16),
//          oldest first, each sequence number one more than the one before
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "target/reservations/reservation_model.h"

namespace rdmablk::target::reservations {

inline constexpr std::size_t kStateHeaderSize = 24;
inline constexpr uint32_t kStateFormatVersion = 2;  // the newest this rdmablk reads and writes
inline constexpr std::size_t kStatePayloadFixedSize = 32;
inline constexpr std::size_t kStateRegistrantSize = 24;
inline constexpr std::size_t kStateEventsFixedSize = 8;
inline constexpr std::size_t kStateEventSize = 24;

// A reservation change made through one gateway group member that the other members act on for their own
// controllers (namespace_reservations.h): a notice to the controllers of `host`, or (notice empty) a host
// whose registration a Preempt and Abort removed, whose writes every member waits out.
struct GroupEvent {
  uint32_t seq = 0;  // one more than the event before it; wraps
  HostId host{};
  ReservationNotice notice = ReservationNotice::empty;
  friend bool operator==(const GroupEvent&, const GroupEvent&) = default;
};
// The events a shared state keeps, the newest: a member that misses more between two reads (it was away)
// misses their notices, which a host also loses when its log page overflows.
inline constexpr std::size_t kMaxGroupEvents = 64;

// The largest state (kMaxRegistrants registrants, kMaxGroupEvents events): a reader need not read past it.
inline constexpr std::size_t kMaxStateSize = kStateHeaderSize + kStatePayloadFixedSize +
                                             kStateRegistrantSize * kMaxRegistrants + kStateEventsFixedSize +
                                             kStateEventSize * kMaxGroupEvents;

// Version 1 without events, else version 2 with the newest kMaxGroupEvents of them.
std::vector<uint8_t> serialize_state(const ReservationState& state, std::span<const GroupEvent> events = {});

enum class StateFormatProblem : uint8_t {
  truncated,            // shorter than its header says: a torn write
  corrupt,              // not a state (magic), a checksum mismatch, a length or contents that cannot be
  unsupported_version,  // whole and intact, but written by a newer rdmablk
};

struct StateFormatError {
  StateFormatProblem problem;
  std::string detail;  // for the log: what exactly is wrong
};

// The state in `bytes`, or what is wrong with them. Never trusts a field before the CRC has vouched for it,
// and rejects a state the model could never produce (reservation_model.h inconsistency()).
// `events`, when given, gets the events a version 2 state carries (none for version 1).
tl::expected<ReservationState, StateFormatError> parse_state(std::span<const uint8_t> bytes,
                                                             std::vector<GroupEvent>* events = nullptr);

const char* state_format_problem_name(StateFormatProblem p) noexcept;

}  // namespace rdmablk::target::reservations
