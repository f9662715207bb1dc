#include "target/control/control_api.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <cstdint>
#include <ctime>
#include <optional>

#include "protocol/status.h"
#include "target/config/config.h"
#include "target/manage/config_edits.h"

namespace rdmablk::target {

using nlohmann::json;

namespace {

std::string iso_time(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", tm, unix_ms % 1000);
}

json latency_json(const stats::HistogramSnapshot& h) {
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
  return json{{"avg", h.count == 0 ? 0.0 : us(h.sum_ns) / static_cast<double>(h.count)},
              {"p50", us(h.percentile_ns(0.50))},
              {"p90", us(h.percentile_ns(0.90))},
              {"p99", us(h.percentile_ns(0.99))},
              {"p99.9", us(h.percentile_ns(0.999))}};
}

json ok(json result) { return json{{"ok", true}, {"result", std::move(result)}}; }
json fail(const std::string& message) { return json{{"ok", false}, {"error", message}}; }

// One reply line. Strings in it may hold bytes that are not UTF-8 (a host NQN from a peer's Connect data,
// a path, a parse error quoting the request): replaced, where a plain dump() would throw.
std::string to_line(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A numeric request field: an integer within [0, max], else nullopt. (json::get<uint16_t>() would cast a
// float such as 1e300 -- undefined behaviour -- and wrap 70000 or -1 to another controller's id.)
std::optional<uint64_t> integer_field(const json& v, uint64_t max) {
  if (v.is_number_unsigned() && v.get<uint64_t>() <= max) return v.get<uint64_t>();
  return std::nullopt;  // nlohmann parses every non-negative integer as unsigned: the rest is negative or not one
}

}  // namespace

json io_stats_json(const stats::IoStatsSnapshot& io) {
  json j;
  for (unsigned c = 0; c < stats::kOpClasses; ++c) {
    const auto& op = io.ops[c];
    j[stats::op_class_name(static_cast<stats::OpClass>(c))] =
        json{{"commands", op.commands}, {"bytes", op.bytes}, {"latency_us", latency_json(op.latency)}};
  }
  json errors = json::array();
  for (const auto& [key, count] : io.errors) {
    json e{{"status", stats::status_field_name(key)}, {"count", count}};
    if (key != stats::kOtherErrorStatus) {
      e["sct"] = key >> 8;
      e["sc"] = key & 0xFF;
    }
    errors.push_back(std::move(e));
  }
  j["errors"] = std::move(errors);
  return j;
}

json status_json(const TargetStatus& s) {
  json listeners = json::array();
  for (const auto& l : s.listeners)
    listeners.push_back({{"transport", l.transport}, {"address", l.address}, {"port", l.port}, {"role", l.role}});
  json reactors = json::array();
  for (const auto& r : s.reactors) {
    reactors.push_back({{"index", r.index},
                        {"cpu", r.cpu},
                        {"busy_ratio", r.recent_busy_ratio},
                        {"busy_seconds", static_cast<double>(r.busy_ns) / 1e9},
                        {"responsive", r.responsive},
                        {"buffers_total", r.buffers_total},
                        {"buffers_in_use", r.buffers_in_use}});
  }
  std::size_t namespaces = 0;
  for (const auto& sub : s.subsystems) namespaces += sub.namespaces.size();
  stats::IoStatsSnapshot total;
  for (const auto& ns : s.namespace_stats) total.merge(ns.io);
  std::size_t io_controllers = 0;
  for (const auto& c : s.controllers) io_controllers += c.discovery ? 0 : 1;
  return json{{"version", s.version},
              {"pid", s.pid},
              {"uptime_seconds", s.uptime_s},
              {"config", {{"path", s.config_path}, {"loaded_at", iso_time(s.config_loaded_unix_ms)}}},
              {"listeners", std::move(listeners)},
              {"reactors", std::move(reactors)},
              {"process",
               {{"resident_bytes", s.process.resident_bytes},
                {"heap_in_use_bytes", s.process.heap_in_use_bytes},
                {"heap_free_bytes", s.process.heap_free_bytes},
                {"open_fds", s.process.open_fds},
                {"threads", s.process.threads}}},
              {"totals",
               {{"subsystems", s.subsystems.size()},
                {"namespaces", namespaces},
                {"controllers", s.controllers.size()},
                {"io_controllers", io_controllers},
                {"read_commands", total.op(stats::OpClass::read).commands},
                {"write_commands", total.op(stats::OpClass::write).commands},
                {"other_commands", total.op(stats::OpClass::other).commands},
                {"read_bytes", total.op(stats::OpClass::read).bytes},
                {"write_bytes", total.op(stats::OpClass::write).bytes},
                {"errors", total.total_errors()}}}};
}

namespace {

json namespace_json(const NamespaceStatus& n) {
  json j{{"subsystem", n.subsystem}, {"nsid", n.nsid},         {"backend", n.backend},
         {"size_bytes", n.size_bytes}, {"block_size", n.block_size}, {"read_only", n.read_only},
         {"volatile_write_cache", n.volatile_cache}, {"ana_group", n.ana_group}, {"uuid", n.uuid},
         {"nguid", n.nguid}};
  if (n.backend == "file") {
    j["path"] = n.path;
    j["direct"] = n.direct;
  } else if (n.backend == "rbd") {
    j["image"] = n.path;
  }
  return j;
}

}  // namespace

json subsystems_json(const TargetStatus& s) {
  json out = json::array();
  for (const auto& sub : s.subsystems) {
    json nss = json::array();
    for (const auto& n : sub.namespaces) nss.push_back(namespace_json(n));
    std::size_t connected = 0;
    for (const auto& c : s.controllers) connected += c.subsystem == sub.nqn ? 1 : 0;
    json dhchap = json::array();
    for (const auto& h : sub.dhchap_hosts) {
      dhchap.push_back({{"nqn", h.nqn}, {"dhchap_key", h.dhchap_key}, {"dhchap_ctrl_key", h.dhchap_ctrl_key}});
    }
    json tls = json::array();
    for (const auto& h : sub.tls_psk_hosts) tls.push_back({{"nqn", h.nqn}, {"tls_psk", h.tls_psk}});
    out.push_back({{"nqn", sub.nqn},
                   {"serial", sub.serial},
                   {"model", sub.model},
                   {"allow_any_host", sub.allow_any_host},
                   {"hosts", sub.hosts},
                   {"require_authentication", sub.require_authentication},
                   {"dhchap_hosts", std::move(dhchap)},
                   {"tls_psk_hosts", std::move(tls)},
                   {"controllers", connected},
                   {"namespaces", std::move(nss)}});
  }
  return out;
}

json namespaces_json(const TargetStatus& s) {
  json out = json::array();
  for (const auto& sub : s.subsystems)
    for (const auto& n : sub.namespaces) out.push_back(namespace_json(n));
  return out;
}

json controllers_json(const TargetStatus& s) {
  json out = json::array();
  for (const auto& c : s.controllers) {
    out.push_back({{"cntlid", c.cntlid},
                   {"subsystem", c.subsystem},
                   {"discovery", c.discovery},
                   {"hostnqn", c.hostnqn},
                   {"hostid", c.hostid},
                   {"peer", c.peer},
                   {"transport", c.transport},
                   {"io_queues", c.io_queues},
                   {"io_queue_depth", c.io_queue_depth},
                   {"kato_ms", c.kato_ms},
                   {"connected_since", iso_time(c.connected_since_unix_ms)},
                   {"in_flight", c.in_flight}});
  }
  return out;
}

namespace {
// A namespace's QoS limits (0 = unlimited) and how long they held commands back: its own, then per host.
json qos_json(const std::vector<stats::QosStats>& qos) {
  json out = json::array();
  for (const auto& q : qos) {
    json j = {{"iops", q.iops},
              {"mbps", q.mbps},
              {"read_mbps", q.read_mbps},
              {"write_mbps", q.write_mbps},
              {"throttled_commands", q.throttled_commands},
              {"throttled_ns", q.throttled_ns}};
    if (!q.host.empty()) j["host"] = q.host;
    out.push_back(std::move(j));
  }
  return out;
}
}  // namespace

json stats_json(const TargetStatus& s, const StatsFilter& f) {
  json nss = json::array();
  for (const auto& n : s.namespace_stats) {
    if (!f.subsystem.empty() && n.subsystem != f.subsystem) continue;
    if (f.nsid != 0 && n.nsid != f.nsid) continue;
    if (f.cntlid >= 0) break;  // asked for a controller only
    json j = io_stats_json(n.io);
    j["subsystem"] = n.subsystem;
    j["nsid"] = n.nsid;
    if (!n.qos.empty()) j["qos"] = qos_json(n.qos);
    nss.push_back(std::move(j));
  }
  json ctrls = json::array();
  for (const auto& c : s.controller_stats) {
    if (!f.subsystem.empty() && c.subsystem != f.subsystem) continue;
    if (f.cntlid >= 0 && c.cntlid != f.cntlid) continue;
    if (f.nsid != 0 && f.cntlid < 0) break;  // asked for a namespace only
    json j = io_stats_json(c.io);
    j["cntlid"] = c.cntlid;
    j["subsystem"] = c.subsystem;
    j["hostnqn"] = c.hostnqn;
    ctrls.push_back(std::move(j));
  }
  return json{{"namespaces", std::move(nss)}, {"controllers", std::move(ctrls)}};
}

namespace {

// A verb's outcome: the result, or a JSON-RPC error code and one line.
struct Outcome {
  json result;
  int code = 0;  // 0: success
  std::string message;
};

Outcome done(json result) { return {std::move(result), 0, {}}; }
Outcome error(int code, std::string message) { return {json(), code, std::move(message)}; }

// JSON-RPC 2.0's codes, and ours for a request that was understood but could not be carried out.
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kParseError = -32700;
constexpr int kFailed = -32000;

Outcome stats_verb(const ControlHooks& hooks, const json& req) {
  StatsFilter f;
  if (auto it = req.find("subsystem"); it != req.end()) {
    if (!it->is_string()) return error(kInvalidParams, "\"subsystem\" must be a string");
    f.subsystem = it->get<std::string>();
  }
  if (auto it = req.find("nsid"); it != req.end()) {
    const auto v = integer_field(*it, UINT32_MAX);
    if (!v) return error(kInvalidParams, "\"nsid\" must be an integer 0..4294967295");
    f.nsid = static_cast<uint32_t>(*v);
  }
  if (auto it = req.find("cntlid"); it != req.end()) {
    const auto v = integer_field(*it, UINT16_MAX);
    if (!v) return error(kInvalidParams, "\"cntlid\" must be an integer 0..65535");
    f.cntlid = static_cast<int>(*v);
  }
  return done(stats_json(hooks.status(), f));
}

Outcome disconnect_verb(const ControlHooks& hooks, const json& req) {
  const auto host = req.find("host");
  const auto cntlid = req.find("cntlid");
  if ((host == req.end()) == (cntlid == req.end()) || (host != req.end() && !host->is_string()))
    return error(kInvalidParams, "disconnect takes either \"host\" (a host NQN) or \"cntlid\"");
  const auto id = cntlid != req.end() ? integer_field(*cntlid, UINT16_MAX) : std::optional<uint64_t>(0);
  if (!id) return error(kInvalidParams, "\"cntlid\" must be an integer 0..65535");
  unsigned n = host != req.end() ? hooks.disconnect_host(host->get<std::string>())
                                 : hooks.disconnect_controller(static_cast<uint16_t>(*id));
  if (n == 0) {
    return error(kFailed, host != req.end() ? "no controller of host " + host->get<std::string>()
                                            : "no controller " + std::to_string(*id));
  }
  return done(json{{"disconnected", n}});
}

std::string verb_list() {
  std::string out = "status, subsystems, namespaces, controllers, stats, managed, group_status, group_handback, disconnect, reload";
  for (const auto& v : manage::edit_verbs()) out += ", " + std::string(v.name);
  return out;
}

Outcome dispatch(const ControlHooks& hooks, const std::string& method, const json& params) {
  if (method == "status") return done(status_json(hooks.status()));
  if (method == "subsystems") return done(subsystems_json(hooks.status()));
  if (method == "namespaces") return done(namespaces_json(hooks.status()));
  if (method == "controllers") return done(controllers_json(hooks.status()));
  if (method == "stats") return stats_verb(hooks, params);
  if (method == "disconnect") return disconnect_verb(hooks, params);
  if (method == "reload") {
    auto r = hooks.reload();
    return r ? done(json{{"summary", *r}}) : error(kFailed, r.error().message);
  }
  if (method == "managed") {
    if (!hooks.managed) return error(kFailed, "managed is not available");
    return done(hooks.managed());
  }
  if (method == "group_status") {
    if (!hooks.group_status) return error(kFailed, "group_status is not available");
    auto r = hooks.group_status();
    return r ? done(*r) : error(kFailed, r.error().message);
  }
  if (method == "group_handback") {
    if (!hooks.group_handback) return error(kFailed, "group_handback is not available");
    const auto member = params.find("member");
    if (member == params.end() || !member->is_string())
      return error(kInvalidParams, "group_handback takes \"member\": the member whose groups to hand back");
    auto r = hooks.group_handback(member->get<std::string>());
    return r ? done(json{{"handed_back", member->get<std::string>()}}) : error(kFailed, r.error().message);
  }
  if (manage::find_edit_verb(method) != nullptr) {
    if (!hooks.manage) return error(kFailed, method + " is not available");
    auto r = hooks.manage(method, params);
    return r ? done(*r) : error(r.error().errno_value == EINVAL ? kInvalidParams : kFailed, r.error().message);
  }
  return error(kMethodNotFound, "unknown command \"" + method + "\" (" + verb_list() + ")");
}

// {"jsonrpc": "2.0", "method": M, "params": {...}, "id": X}: the reply carries the same id. A request without an
// id is answered too (with id null): the socket is one reply line per request line.
std::string json_rpc(const ControlHooks& hooks, const json& req) {
  json id = req.contains("id") ? req["id"] : json();
  auto reply = [&](const Outcome& o) {
    json r{{"jsonrpc", "2.0"}, {"id", id}};
    if (o.code == 0) {
      r["result"] = o.result;
    } else {
      r["error"] = json{{"code", o.code}, {"message", o.message}};
    }
    return to_line(r);
  };
  if (req["jsonrpc"] != "2.0" || !req.contains("method") || !req["method"].is_string() ||
      (!id.is_null() && !id.is_string() && !id.is_number())) {
    return reply(error(kInvalidRequest, "a JSON-RPC request has \"jsonrpc\": \"2.0\", a \"method\" string and an id"));
  }
  json params = req.contains("params") ? req["params"] : json::object();
  if (!params.is_object()) return reply(error(kInvalidParams, "\"params\" must be an object (by-name parameters)"));
  return reply(dispatch(hooks, req["method"].get<std::string>(), params));
}

}  // namespace

std::string handle_control_request(const ControlHooks& hooks, const std::string& line) {
  try {
    const json req = json::parse(line, nullptr, true);
    if (req.is_array()) {
      return to_line(json{{"jsonrpc", "2.0"},
                          {"id", nullptr},
                          {"error", {{"code", kInvalidRequest}, {"message", "batch requests are not supported"}}}});
    }
    if (!req.is_object()) return to_line(fail("a request is a JSON object"));
    if (req.contains("jsonrpc")) return json_rpc(hooks, req);
    const auto cmd_it = req.find("command");
    if (cmd_it == req.end() || !cmd_it->is_string()) return to_line(fail("the request has no \"command\" string"));
    json params = req;
    params.erase("command");
    const Outcome o = dispatch(hooks, cmd_it->get<std::string>(), params);
    return to_line(o.code == 0 ? ok(o.result) : fail(o.message));
  } catch (const json::parse_error& e) {
    if (line.find("\"jsonrpc\"") != std::string::npos) {
      return to_line(json{{"jsonrpc", "2.0"},
                          {"id", nullptr},
                          {"error", {{"code", kParseError}, {"message", std::string("malformed request: ") + e.what()}}}});
    }
    return to_line(fail(std::string("malformed request: ") + e.what()));
  } catch (const json::exception& e) {
    return to_line(fail(std::string("malformed request: ") + e.what()));
  }
}

}  // namespace rdmablk::target
