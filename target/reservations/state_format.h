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
inline constexpr uint32_t kStateFormatVersion = 1;
inline constexpr std::size_t kStatePayloadFixedSize = 32;
inline constexpr std::size_t kStateRegistrantSize = 24;
// The largest version 1 state (kMaxRegistrants registrants): a reader need not read past it.
inline constexpr std::size_t kMaxStateSize =
    kStateHeaderSize + kStatePayloadFixedSize + kStateRegistrantSize * kMaxRegistrants;

std::vector<uint8_t> serialize_state(const ReservationState& state);

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
tl::expected<ReservationState, StateFormatError> parse_state(std::span<const uint8_t> bytes);

const char* state_format_problem_name(StateFormatProblem p) noexcept;

}  // namespace rdmablk::target::reservations
