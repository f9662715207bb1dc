// Multipath for an attached volume: the pure parts the supervisor (ublk/volume.cpp) decides with.
//
// A path is one controller of the same subsystem reached through another address. The host reads each
// controller's ANA log page (LID 0Ch) and uses the best path it can: ANA optimized first, else
// non-optimized; inaccessible, persistent-loss and change paths carry no I/O (NVMe Base 2.0, 8.20.3), as
// the Linux host's nvme_path_is_optimized / __nvme_find_path choose. A controller without ANA reporting
// (CMIC bit 3 clear) counts as optimized.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "protocol/ana.h"
#include "protocol/result.h"

namespace rdmablk::initiator::ublk {

// Connection state of one path, as `rdmablk list` shows it.
enum class PathConnection : uint8_t {
  live,        // admin queue up
  connecting,  // lost or not yet up: reconnecting with the path's backoff
  failed,      // given up (a different namespace behind it): never used
};
const char* path_connection_name(PathConnection c) noexcept;  // "live", "connecting", "failed"

struct PathStatus {
  PathConnection connection = PathConnection::connecting;
  // The namespace's ANA state through this path; nullopt: the controller does not report ANA.
  std::optional<protocol::AnaState> ana;
};

// Whether I/O may go down a path in this state (optimized or non-optimized).
constexpr bool ana_usable(protocol::AnaState s) noexcept {
  return s == protocol::AnaState::optimized || s == protocol::AnaState::non_optimized;
}
// "optimized", ... or "none" when the controller does not report ANA.
std::string ana_state_text(const std::optional<protocol::AnaState>& s);

// The path to send I/O on: a live path whose ANA state is usable, optimized before non-optimized. Among
// equals the current one stays (no flapping between two optimized paths), else the first listed.
// nullopt: no path is usable (I/O is held; the loss timeout runs).
std::optional<std::size_t> choose_path(std::span<const PathStatus> paths, std::optional<std::size_t> current) noexcept;

// --- the ANA log page on the host side ------------------------------------------------------------

// Parses an ANA log page (header, then NGRPS group descriptors, each followed by its NNSIDS NSIDs).
// Every count is checked against the bytes read, every state against the five the spec defines; the
// error says which descriptor is wrong and where. Bytes past the last descriptor are ignored (the host
// reads a size fixed from Identify, the log may be shorter).
struct AnaLog {
  uint64_t chgcnt = 0;
  std::vector<protocol::AnaGroupEntry> groups;
};
Result<AnaLog> parse_ana_log(std::span<const uint8_t> page);

// The state of namespace `nsid` in `log`: the group that lists the NSID, else (an RGO log, or a log
// without NSID lists) the group `anagrpid` from Identify Namespace. nullopt when neither is there.
std::optional<protocol::AnaState> ana_state_of(const AnaLog& log, uint32_t nsid, uint32_t anagrpid) noexcept;

}  // namespace rdmablk::initiator::ublk
