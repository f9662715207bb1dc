// 128-bit identifiers as text: UUIDs (RFC 9562; namespace UUIDs, host identifiers) and NGUIDs (NVMe Base
// 2.0, 4.5.1.3). The one home of their parsing and formatting, for the target's config (namespaces' uuid
// and nguid), its status output, and the initiator (--hostid, /etc/nvme/hostid, Identify output).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rdmablk::protocol {

using Id128 = std::array<uint8_t, 16>;

// The 8-4-4-4-12 layout: 36 characters with '-' at 8, 13, 18 and 23 and only there (the digits are not
// checked).
bool is_canonical_uuid(std::string_view text) noexcept;
// 32 hex digits of either case, '-' anywhere ignored (an NGUID as people write it); nullopt otherwise.
std::optional<Id128> parse_hex_id(std::string_view text) noexcept;
// A UUID: 8-4-4-4-12 hex digits of either case.
std::optional<Id128> parse_uuid(std::string_view text) noexcept;
// A UUID as 8-4-4-4-12 hex digits or as 32 plain hex digits (what /etc/nvme/hostid and nvme-cli accept).
std::optional<Id128> parse_uuid_or_hex(std::string_view text) noexcept;

// 32 lower-case hex digits (an NGUID).
std::string format_hex_id(const Id128& id);
// 8-4-4-4-12 lower-case hex digits.
std::string format_uuid(const Id128& id);

bool all_zero(const Id128& id) noexcept;

}  // namespace rdmablk::protocol
