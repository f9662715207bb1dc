#include "target/control/control_api.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <cstdint>
#include <ctime>
#include <optional>

#include "protocol/status.h"
#include "target/config/config.h"

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

std::string handle_control_request(const ControlHooks& hooks, const std::string& line) {
  json reply;
  try {
    const json req = json::parse(line);
    if (!req.is_object()) return to_line(fail("a request is a JSON object"));
    const auto cmd_it = req.find("command");
    if (cmd_it == req.end() || !cmd_it->is_string()) return to_line(fail("the request has no \"command\" string"));
    const std::string cmd = *cmd_it;
    if (cmd == "status") {
      reply = ok(status_json(hooks.status()));
    } else if (cmd == "subsystems") {
      reply = ok(subsystems_json(hooks.status()));
    } else if (cmd == "namespaces") {
      reply = ok(namespaces_json(hooks.status()));
    } else if (cmd == "controllers") {
      reply = ok(controllers_json(hooks.status()));
    } else if (cmd == "stats") {
      StatsFilter f;
      if (auto it = req.find("subsystem"); it != req.end()) f.subsystem = it->get<std::string>();
      if (auto it = req.find("nsid"); it != req.end()) {
        const auto v = integer_field(*it, UINT32_MAX);
        if (!v) return to_line(fail("\"nsid\" must be an integer 0..4294967295"));
        f.nsid = static_cast<uint32_t>(*v);
      }
      if (auto it = req.find("cntlid"); it != req.end()) {
        const auto v = integer_field(*it, UINT16_MAX);
        if (!v) return to_line(fail("\"cntlid\" must be an integer 0..65535"));
        f.cntlid = static_cast<int>(*v);
      }
      reply = ok(stats_json(hooks.status(), f));
    } else if (cmd == "disconnect") {
      const auto host = req.find("host");
      const auto cntlid = req.find("cntlid");
      if ((host == req.end()) == (cntlid == req.end()))
        return to_line(fail("disconnect takes either \"host\" (a host NQN) or \"cntlid\""));
      const auto id = cntlid != req.end() ? integer_field(*cntlid, UINT16_MAX) : std::optional<uint64_t>(0);
      if (!id) return to_line(fail("\"cntlid\" must be an integer 0..65535"));
      unsigned n = host != req.end() ? hooks.disconnect_host(host->get<std::string>())
                                     : hooks.disconnect_controller(static_cast<uint16_t>(*id));
      if (n == 0) return to_line(fail(host != req.end() ? "no controller of host " + host->get<std::string>()
                                                        : "no controller " + std::to_string(*id)));
      reply = ok(json{{"disconnected", n}});
    } else if (cmd == "ana_set") {
      const auto listener = req.find("listener");
      const auto group = req.find("group");
      const auto state = req.find("state");
      if (listener == req.end() || !listener->is_string() || group == req.end() || state == req.end() ||
          !state->is_string())
        return to_line(fail("ana_set takes \"listener\" (ADDR:PORT), \"group\" and \"state\""));
      const auto g = integer_field(*group, kAnaGroupMax);
      if (!g || *g == 0) return to_line(fail("\"group\" must be an integer 1.." + std::to_string(kAnaGroupMax)));
      auto parsed = parse_ana_state(state->get<std::string>());
      if (!parsed) return to_line(fail(parsed.error().message));
      if (!hooks.ana_set) return to_line(fail("ana_set is not available"));
      auto r = hooks.ana_set(listener->get<std::string>(), static_cast<uint32_t>(*g), *parsed);
      reply = r ? ok(json{{"changed", *r}}) : fail(r.error().message);
    } else if (cmd == "reload") {
      auto r = hooks.reload();
      reply = r ? ok(json{{"summary", *r}}) : fail(r.error().message);
    } else {
      return to_line(fail("unknown command \"" + cmd +
                          "\" (status, subsystems, namespaces, controllers, stats, disconnect, reload, ana_set)"));
    }
  } catch (const json::exception& e) {
    return to_line(fail(std::string("malformed request: ") + e.what()));
  }
  return to_line(reply);
}

}  // namespace rdmablk::target
