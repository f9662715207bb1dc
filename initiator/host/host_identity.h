// Host identity (NQN + 128-bit host identifier), picked the way nvme-cli/libnvme pick them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/result.h"

namespace rdmablk::initiator {

using HostId = std::array<uint8_t, 16>;

struct HostIdentity {
  std::string hostnqn;
  HostId hostid{};
};

// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (or 32 hex digits) -> 16 bytes.
Result<HostId> parse_uuid(std::string_view s);
std::string format_uuid(const HostId& id);

// Where the defaults come from; overridable for tests.
struct HostIdentitySources {
  std::string hostnqn_file = "/etc/nvme/hostnqn";
  std::string hostid_file = "/etc/nvme/hostid";
  std::string machine_id_file = "/etc/machine-id";
};

// hostnqn: `hostnqn` if given, else the first line of /etc/nvme/hostnqn, else
// nqn.2014-08.org.nvmexpress:uuid:<hostid>. hostid: `hostid` if given, else /etc/nvme/hostid, else the UUID
// of a uuid-form hostnqn, else a UUID derived from /etc/machine-id with an application key (stable per
// machine, and not the machine-id itself), else random. Rejects a malformed NQN or UUID.
Result<HostIdentity> resolve_host_identity(std::optional<std::string> hostnqn, std::optional<std::string> hostid,
                                           const HostIdentitySources& sources = {});

}  // namespace rdmablk::initiator
