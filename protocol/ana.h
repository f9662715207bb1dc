// Asymmetric Namespace Access (NVMe Base 2.0, 8.20): the ANA log page (LID 0Ch, 5.16.1.13), the ANA states,
// the path-related statuses an I/O command gets on a path that cannot serve it, and the ANA Change notice.
#pragma once

#include <vector>

#include "protocol/wire.h"
#include "protocol/completion.h"
#include "protocol/status.h"

namespace rdmablk::protocol {

// ANA state of a group as seen through one controller (Base 2.0 Figure 228, ANAS bits 3:0).
enum class AnaState : uint8_t {
  optimized = 0x01,
  non_optimized = 0x02,
  inaccessible = 0x03,
  persistent_loss = 0x04,
  change = 0x0F,
};
inline constexpr uint8_t kAnaStateMask = 0x0F;
// The ANA group IDs a target offers: 1..kAnaGroupMax (Identify ANAGRPMAX = NANAGRPID, nvmet's
// NVMET_MAX_ANAGRPS).
inline constexpr uint32_t kAnaGroupMax = 128;

// True for the five values the spec defines (a host rejects a log with anything else).
constexpr bool is_valid_ana_state(uint8_t v) noexcept {
  return v == 0x01 || v == 0x02 || v == 0x03 || v == 0x04 || v == 0x0F;
}
const char* ana_state_name(AnaState s) noexcept;  // "optimized", "non-optimized", ...

// Get Log Page LSP for LID 0Ch, bit 0 RGO: return groups only (no NSID lists).
inline constexpr uint8_t kAnaLspRgo = 1u << 0;

// ANA log page header (Base 2.0 Figure 226).
struct AnaLogHeader {
  le64 chgcnt;                   // 0  change count: incremented whenever the log page changes
  le16 ngrps;                    // 8  number of ANA group descriptors that follow
  std::array<uint8_t, 6> rsvd10; // 10
};
static_assert(sizeof(AnaLogHeader) == 16);
static_assert(offsetof(AnaLogHeader, chgcnt) == 0);
static_assert(offsetof(AnaLogHeader, ngrps) == 8);
static_assert(offsetof(AnaLogHeader, rsvd10) == 10);

// ANA group descriptor (Base 2.0 Figure 227), followed by NNSIDS le32 NSIDs in ascending order (none with RGO).
struct AnaGroupDescriptor {
  le32 anagrpid;                  // 0  ANA group identifier (1..ANAGRPMAX)
  le32 nnsids;                    // 4  number of NSIDs listed after this descriptor
  le64 chgcnt;                    // 8  change count of this group's state or membership
  uint8_t anas;                   // 16 ANA state, bits 3:0 (AnaState)
  std::array<uint8_t, 15> rsvd17; // 17
};
static_assert(sizeof(AnaGroupDescriptor) == 32);
static_assert(offsetof(AnaGroupDescriptor, anagrpid) == 0);
static_assert(offsetof(AnaGroupDescriptor, nnsids) == 4);
static_assert(offsetof(AnaGroupDescriptor, chgcnt) == 8);
static_assert(offsetof(AnaGroupDescriptor, anas) == 16);
static_assert(offsetof(AnaGroupDescriptor, rsvd17) == 17);
static_assert(WireLayout<AnaLogHeader>);
static_assert(WireLayout<AnaGroupDescriptor>);

// One group as the log page reports it.
struct AnaGroupEntry {
  uint32_t anagrpid = 0;
  AnaState state = AnaState::optimized;
  uint64_t chgcnt = 0;
  std::vector<uint32_t> nsids;  // ascending
};

// Serializes the log page: header, then each group's descriptor and (unless `groups_only`, LSP RGO) NSIDs.
std::vector<uint8_t> make_ana_log(uint64_t chgcnt, std::span<const AnaGroupEntry> groups, bool groups_only);

// Bytes the Linux host reserves for the log and compares with MDTS (nvme_mpath_init_identify): the header,
// NANAGRPID descriptors and MNAN NSIDs. Above the maximum transfer size the host turns ANA off.
constexpr uint64_t ana_log_max_size(uint32_t nanagrpid, uint32_t mnan) noexcept {
  return sizeof(AnaLogHeader) + uint64_t{nanagrpid} * sizeof(AnaGroupDescriptor) + uint64_t{mnan} * 4;
}

// ANA Change notice: AER completion DW0 (type 2h notice, information 03h, log page 0Ch).
inline constexpr uint32_t kAnaChangeEvent =
    async_event_result(AsyncEventType::notice, static_cast<uint8_t>(AsyncEventNotice::ana_change), 0x0C);

// The status of an I/O command on a path whose group is in `s` (nvmet_check_ana_state): success for the
// optimized and non-optimized states, otherwise a path-related status without DNR so the host retries on
// another path.
constexpr Status ana_io_status(AnaState s) noexcept {
  switch (s) {
    case AnaState::inaccessible: return status::ana_inaccessible;
    case AnaState::persistent_loss: return status::ana_persistent_loss;
    case AnaState::change: return status::ana_transition;
    case AnaState::optimized:
    case AnaState::non_optimized: break;
  }
  return status::success;
}

}  // namespace rdmablk::protocol
