// The control protocol: JSON requests from the control socket, one per line, answered from the daemon's state.
// Two framings of the same verbs:
//
//   JSON-RPC 2.0:  {"jsonrpc": "2.0", "method": "namespace_add", "params": {...}, "id": 1}
//                  reply {"jsonrpc": "2.0", "result": {...}, "id": 1}
//                     or {"jsonrpc": "2.0", "error": {"code": -32602, "message": "..."}, "id": 1}
//   plain:         {"command": "stats", "subsystem": NQN}   reply {"ok": true, "result": {...}}
//                                                              or {"ok": false, "error": "..."}
//
// Reading: status, subsystems, namespaces, controllers, stats, managed. Acting: disconnect, reload. Changing
// (persisted, target/manage/): the verbs of manage::edit_verbs(). docs/management-api.md has every verb with
// its request and answer; `rdmablk-target ctl` is the client.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include "protocol/ana.h"
#include "protocol/result.h"
#include "target/core/status.h"

namespace rdmablk::target {

// What the protocol needs of the daemon.
struct ControlHooks {
  std::function<TargetStatus()> status;
  std::function<Result<std::string>()> reload;  // the summary, or the config error
  std::function<unsigned(const std::string& hostnqn)> disconnect_host;
  std::function<unsigned(uint16_t cntlid)> disconnect_controller;
  // A management verb (target/manage/config_edits.h: namespace_add, ana_set, ...): its result, or the error
  // (EINVAL: the request's fault).
  std::function<Result<nlohmann::json>(const std::string& verb, const nlohmann::json& params)> manage;
  // The management API's overlay: {"overlay": PATH, "edits": [...]}, secrets redacted.
  std::function<nlohmann::json()> managed;
  // `group_status`: the gateway group member's view (target/daemon/daemon_group.h), or why there is none.
  std::function<Result<nlohmann::json>()> group_status;
  // `group_handback`: releases a member's lease this member took over (failback: manual).
  std::function<Result<void>(const std::string& member)> group_handback;
};

// One request line in, one reply line out (never throws: malformed input is an error reply).
std::string handle_control_request(const ControlHooks& hooks, const std::string& line);

// The JSON documents of the verbs (also used by tests).
nlohmann::json status_json(const TargetStatus& s);
nlohmann::json subsystems_json(const TargetStatus& s);
nlohmann::json namespaces_json(const TargetStatus& s);
nlohmann::json controllers_json(const TargetStatus& s);
struct StatsFilter {
  std::string subsystem;  // empty = any
  uint32_t nsid = 0;      // 0 = any
  int cntlid = -1;        // -1 = any
};
nlohmann::json stats_json(const TargetStatus& s, const StatsFilter& f);
nlohmann::json io_stats_json(const stats::IoStatsSnapshot& io);

}  // namespace rdmablk::target
