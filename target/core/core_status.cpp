// What the control socket and /metrics report of the core: exported subsystems and namespaces, connected
// controllers, merged statistics; and disconnecting controllers on request. Control thread only.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "target/core/core_internal.h"

namespace rdmablk::target {

namespace {
// A namespace's configured limits with what they held back: its own (from its statistics), then per host.
std::vector<stats::QosStats> qos_stats(const Namespace& ns, const stats::IoStatsSnapshot& io) {
  std::vector<stats::QosStats> out;
  const NamespaceQosConfig& c = ns.config.qos;
  if (!c.any()) return out;
  auto entry = [](std::string host, const QosLimits& l) {
    return stats::QosStats{std::move(host), l.iops, l.mbps, l.read_mbps, l.write_mbps, 0, 0};
  };
  out.push_back(entry("", c.limits));
  out.back().throttled_commands = io.throttled_commands;
  out.back().throttled_ns = io.throttled_ns;
  for (const HostQosConfig& h : c.hosts) {
    out.push_back(entry(h.host, h.limits));
    if (const int i = ns.qos->host_index(h.host); i >= 0) {
      const qos::HostThrottle& t = ns.qos->host_throttle(static_cast<std::size_t>(i));
      out.back().throttled_commands = t.commands.load(std::memory_order_relaxed);
      out.back().throttled_ns = t.ns.load(std::memory_order_relaxed);
    }
  }
  return out;
}
}  // namespace

namespace {

std::string hex(const std::array<uint8_t, 16>& bytes) {
  std::string s;
  for (uint8_t b : bytes) s += fmt::format("{:02x}", b);
  return s;
}

NamespaceStatus namespace_status(const std::string& nqn, const Namespace& ns) {
  NamespaceStatus n;
  n.subsystem = nqn;
  n.nsid = ns.nsid;
  n.backend = backend_kind_name(ns.config.backend);
  if (ns.config.backend == BackendKind::file) {
    n.path = ns.config.path;
    n.direct = ns.config.direct;
  } else if (ns.config.backend == BackendKind::rbd) {
    n.path = ns.backend->describe();  // "rbd POOL/[NS/]IMAGE (client ID)"
  }
  n.block_size = ns.geometry.block_size;
  n.size_bytes = ns.geometry.num_blocks * ns.geometry.block_size;
  n.read_only = ns.read_only;
  n.volatile_cache = ns.volatile_cache();
  n.ana_group = ns.ana_group.load(std::memory_order_relaxed);
  n.uuid = format_uuid(ns.config.uuid);
  n.nguid = hex(ns.config.nguid);
  return n;
}

}  // namespace

stats::IoStatsSnapshot TargetCore::controller_io_locked(const Controller& ctrl) const {
  stats::IoStatsSnapshot io = ctrl.closed_io;
  for (const auto& w : ctrl.io_queue_table)
    if (auto q = w.lock()) io.add(q->io_stats);
  return io;
}

stats::IoStatsSnapshot TargetCore::namespace_io(const std::string& nqn, uint32_t nsid) const {
  stats::IoStatsSnapshot io;
  for (const auto& rs : reactor_states_) rs->collect_namespace_stats(nqn, nsid, io);
  return io;
}

void TargetCore::fill_status(TargetStatus& out) const {
  std::vector<std::pair<std::string, std::shared_ptr<const Namespace>>> namespaces;
  {
    std::lock_guard lock(mu_);
    for (const auto& [nqn, sub] : subsystems_) {
      SubsystemStatus s;
      s.nqn = nqn;
      s.serial = sub->serial;
      s.model = sub->model;
      s.allow_any_host = sub->allow_any_host;
      s.hosts = sub->hosts;
      s.require_authentication = sub->require_authentication;
      for (const auto& [host, a] : sub->host_auth) s.dhchap_hosts.push_back({host, a->key_source, a->ctrl_key_source});
      for (const auto& [host, source] : sub->tls_psk_sources) s.tls_psk_hosts.push_back({host, source});
      for (const auto& ns : sub->table->namespaces) {
        s.namespaces.push_back(namespace_status(nqn, *ns));
        namespaces.emplace_back(nqn, ns);
      }
      out.subsystems.push_back(std::move(s));
    }
    for (const auto& [cntlid, ctrl] : controllers_) {
      ControllerStatus c;
      c.cntlid = cntlid;
      c.discovery = ctrl->discovery;
      c.subsystem = ctrl->discovery ? std::string(protocol::kDiscoveryNqn) : ctrl->subsys->nqn;
      c.hostnqn = ctrl->hostnqn;
      c.hostid = format_uuid(ctrl->hostid);
      c.peer = ctrl->peer;
      c.transport = transport::transport_name(ctrl->trtype);
      c.kato_ms = ctrl->kato_ms;
      c.connected_since_unix_ms = ctrl->connected_unix_ms;
      for (const auto& w : ctrl->io_queue_table) {
        auto q = w.lock();
        if (!q) continue;
        ++c.io_queues;
        c.io_queue_depth = std::max(c.io_queue_depth, q->sq_entries);
        const uint64_t in = q->commands_received.load(std::memory_order_relaxed);
        const uint64_t done = q->commands_completed.load(std::memory_order_relaxed);
        c.in_flight += in > done ? in - done : 0;
      }
      if (!ctrl->discovery) {
        stats::ControllerStats cs;
        cs.cntlid = cntlid;
        cs.subsystem = c.subsystem;
        cs.hostnqn = c.hostnqn;
        cs.io = controller_io_locked(*ctrl);
        out.controller_stats.push_back(std::move(cs));
      }
      out.controllers.push_back(std::move(c));
    }
  }
  // Per-reactor blocks have their own locks: merged outside the core's.
  for (auto& [nqn, n] : namespaces) {
    stats::NamespaceStats ns;
    ns.subsystem = nqn;
    ns.nsid = n->nsid;
    ns.io = namespace_io(nqn, n->nsid);
    ns.qos = qos_stats(*n, ns.io);
    out.namespace_stats.push_back(std::move(ns));
  }
}

unsigned TargetCore::disconnect_host(std::string_view hostnqn) {
  std::vector<std::function<void()>> after;
  unsigned n = 0;
  {
    std::lock_guard lock(mu_);
    std::vector<std::shared_ptr<Controller>> matching;
    for (const auto& [id, ctrl] : controllers_)
      if (ctrl->hostnqn == hostnqn) matching.push_back(ctrl);
    for (auto& ctrl : matching) {
      spdlog::info("controller {} ({}): disconnected by the operator", ctrl->cntlid, ctrl->hostnqn);
      teardown_locked(ctrl, "disconnected by the operator", after);
      ++n;
    }
  }
  for (auto& fn : after) fn();
  return n;
}

unsigned TargetCore::disconnect_controller(uint16_t cntlid) {
  std::vector<std::function<void()>> after;
  {
    std::lock_guard lock(mu_);
    auto ctrl = controllers_.find(cntlid);
    if (!ctrl) return 0;
    spdlog::info("controller {} ({}): disconnected by the operator", ctrl->cntlid, ctrl->hostnqn);
    teardown_locked(ctrl, "disconnected by the operator", after);
  }
  for (auto& fn : after) fn();
  return 1;
}

}  // namespace rdmablk::target
