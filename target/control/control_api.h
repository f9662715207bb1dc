// The control protocol: JSON requests from the control socket, answered from the daemon's state.
//
//   request:  {"command": "status"}             reply: {"ok": true, "result": {...}}
//             {"command": "stats", "subsystem": NQN, "nsid": N, "cntlid": C}   (filters optional)
//             {"command": "disconnect", "host": NQN} | {"command": "disconnect", "cntlid": C}
//             {"command": "reload"}
//             {"command": "ana_set", "listener": "ADDR:PORT", "group": N, "state": "inaccessible"}
//   error:    {"ok": false, "error": "what went wrong"}
//
// Verbs: status, subsystems, namespaces, controllers, stats, disconnect, reload, ana_set.
// docs/operations.md#the-control-socket-rdmablk-target-ctl shows each with its output; `rdmablk-target ctl` is
// the client.
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
  // The ANA state of a group on an io listener until the next reload: whether it changed, or the error.
  std::function<Result<bool>(const std::string& listener, uint32_t group, protocol::AnaState state)> ana_set;
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
