#include "initiator/host/host_identity.h"

#include <fmt/format.h>
#include <systemd/sd-id128.h>

#include <cstring>
#include <random>

#include "initiator/host/first_line.h"
#include "protocol/fabrics.h"
#include "protocol/uuid.h"

namespace rdmablk::initiator {

namespace {

HostId random_uuid() {
  std::random_device rd;
  HostId id{};
  for (auto& b : id) b = static_cast<uint8_t>(rd());
  id[6] = static_cast<uint8_t>((id[6] & 0x0F) | 0x40);  // version 4
  id[8] = static_cast<uint8_t>((id[8] & 0x3F) | 0x80);  // RFC 4122 variant
  return id;
}

// Stable per machine: systemd's HMAC of the machine id with our application id, so the machine id itself
// never leaves the host.
std::optional<HostId> machine_uuid() {
  // SD_ID128_ARRAY, not SD_ID128_MAKE: the latter is a C compound literal, which clang refuses in C++.
  constexpr sd_id128_t kApp = SD_ID128_ARRAY(5c, 0a, 7d, 2e, 91, 3b, 4f, 6a, 8e, 17, c4, 52, 09, d3, e8, 71);
  sd_id128_t out;
  if (sd_id128_get_machine_app_specific(kApp, &out) < 0) return std::nullopt;
  HostId id{};
  std::memcpy(id.data(), out.bytes, id.size());
  return id;
}

}  // namespace

Result<HostId> parse_uuid(std::string_view s) {
  auto id = protocol::parse_uuid_or_hex(s);
  if (!id) {
    return make_error("invalid host id '" + std::string(s) + "' (expected a UUID like 3fa85f64-5717-4562-b3fc-2c963f66afa6)");
  }
  return *id;
}

std::string format_uuid(const HostId& id) { return protocol::format_uuid(id); }

Result<HostIdentity> resolve_host_identity(std::optional<std::string> hostnqn, std::optional<std::string> hostid,
                                           const HostIdentitySources& sources) {
  HostIdentity out;
  if (!hostnqn) hostnqn = read_first_line(sources.hostnqn_file);
  if (!hostid) hostid = read_first_line(sources.hostid_file);

  if (hostid) {
    auto id = parse_uuid(*hostid);
    if (!id) return tl::unexpected(id.error());
    out.hostid = *id;
  } else if (hostnqn && hostnqn->starts_with(protocol::kUuidNqnPrefix)) {
    auto id = parse_uuid(std::string_view(*hostnqn).substr(protocol::kUuidNqnPrefix.size()));
    out.hostid = id ? *id : random_uuid();
  } else if (auto m = machine_uuid()) {
    out.hostid = *m;
  } else {
    out.hostid = random_uuid();
  }

  out.hostnqn = hostnqn ? *hostnqn : std::string(protocol::kUuidNqnPrefix) + format_uuid(out.hostid);
  if (auto v = protocol::decode_nqn(out.hostnqn); !v) {
    return make_error(fmt::format("invalid host NQN '{}': {} at byte {}", out.hostnqn, v.error().what, v.error().offset));
  }
  return out;
}

}  // namespace rdmablk::initiator
