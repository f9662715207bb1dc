// What one fio file names: a controller (transport, address, port, subsystem NQN, host NQN/ID) and a
// namespace, from the engine's options and the file's name. The name may be
//   - a namespace URI as `rdmablk bench` takes it:     tcp://127.0.0.1:4420/nqn.2024-11.io.rdmablk:vol0/1
//   - SPDK's fio plugin style, space-separated keys:   trtype=tcp traddr=127.0.0.1 trsvcid=4420
//                                                       subnqn=nqn.2024-11.io.rdmablk:vol0 ns=1
//     (keys: trtype, adrfam, traddr, trsvcid, subnqn, ns | nsid, hostnqn, hostid)
//   - anything else (a label): the options name everything.
// fio splits filename= at ':', so a ':' inside a name is written '\:'; fio removes the backslash
// before the engine sees the name. What the name gives wins over the options; the options fill in
// the rest (transport tcp, trsvcid 4420 and nsid 1 by default).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/result.h"
#include "transport/address.h"

namespace rdmablk::fio_engine {

struct EngineOptions {
  std::optional<std::string> transport, traddr, trsvcid, subnqn, hostnqn, hostid;
  uint32_t nsid = 0;  // 0 = not given
};

struct TargetSpec {
  transport::TransportAddress address;
  std::string subnqn;
  uint32_t nsid = 1;
  std::optional<std::string> hostnqn, hostid;

  // The controller part (everything but the namespace): files of one job must agree on it.
  std::string controller_key() const;
  std::string describe() const;  // "tcp://127.0.0.1:4420/nqn.../1"
};

Result<TargetSpec> resolve_target(const EngineOptions& options, std::string_view filename);

// An engine option's value with '\:' read as ':': the spelling filename= needs is accepted in the options
// too (no address or NQN contains a backslash), so a value copied from a filename works.
std::string unescape_option(std::string_view value);

}  // namespace rdmablk::fio_engine
