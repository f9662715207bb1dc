// The reload planner: two configs in, a ChangeList out (reload_plan.h). Pure: the core applies the list.
#include "target/core/reload_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "security/dhchap_key.h"

namespace rdmablk::target {

namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// By content: reading a key file again gives new key objects for the same secret.
bool same_secret(const DhchapSecretConfig& a, const DhchapSecretConfig& b) {
  if (a.file != b.file || (a.key == nullptr) != (b.key == nullptr)) return false;
  return a.key == nullptr || (a.key->transform() == b.key->transform() &&
                              security::dhchap::constant_time_equal(a.key->secret(), b.key->secret()));
}

// What the core takes from a host entry: its DH-HMAC-CHAP settings and where its TLS PSK comes from (the
// daemon keeps the PSKs themselves).
bool same_host(const HostConfig& a, const HostConfig& b) {
  return a.nqn == b.nqn && same_secret(a.dhchap_key, b.dhchap_key) &&
         same_secret(a.dhchap_ctrl_key, b.dhchap_ctrl_key) && a.tls_psk.describe() == b.tls_psk.describe() && a.dhchap_hashes == b.dhchap_hashes &&
         a.dhchap_dhgroups == b.dhchap_dhgroups;
}

bool same_settings(const SubsystemConfig& a, const SubsystemConfig& b) {
  return a.model == b.model && a.require_authentication == b.require_authentication && a.cntlid_min == b.cntlid_min &&
         a.cntlid_max == b.cntlid_max &&
         std::equal(a.host_configs.begin(), a.host_configs.end(), b.host_configs.begin(), b.host_configs.end(),
                    same_host);
}

bool same_key(const ListenerConfig& a, const ListenerConfig& b) { return listener_key(a) == listener_key(b); }

bool same_listener(const ListenerConfig& a, const ListenerConfig& b) {
  return same_listener_settings(a, b) && a.ana == b.ana;
}

template <class Config>
auto* find_subsystem(Config& config, std::string_view nqn) {
  auto it = std::find_if(config.subsystems.begin(), config.subsystems.end(),
                         [&](const SubsystemConfig& s) { return s.nqn == nqn; });
  return it == config.subsystems.end() ? nullptr : &*it;
}

template <class Subsystem>
auto* find_namespace(Subsystem& sub, uint32_t nsid) {
  auto it = std::find_if(sub.namespaces.begin(), sub.namespaces.end(),
                         [&](const NamespaceConfig& n) { return n.nsid == nsid; });
  return it == sub.namespaces.end() ? nullptr : &*it;
}

bool only_size_differs(const NamespaceConfig& old, const NamespaceConfig& next) {
  NamespaceConfig resized = old;
  resized.size = next.size;
  return same_backend(resized, next);
}

void plan_namespaces(const SubsystemConfig& running, const SubsystemConfig& next, ChangeList& out) {
  for (const auto& nc : next.namespaces) {
    const NamespaceConfig* old = find_namespace(running, nc.nsid);
    if (old == nullptr) {
      out.push_back(change::NamespaceAdded{next.nqn, nc});
    } else if (same_backend(*old, nc)) {
      if (old->ana_group != nc.ana_group)
        out.push_back(change::NamespaceMoved{next.nqn, nc.nsid, old->ana_group, nc.ana_group});
      if (old->hosts != nc.hosts) out.push_back(change::NamespaceMasked{next.nqn, nc.nsid, old->hosts, nc.hosts});
      if (old->qos != nc.qos) out.push_back(change::QosChanged{next.nqn, nc.nsid, old->qos, nc.qos});
    } else if (only_size_differs(*old, nc)) {
      out.push_back(change::NamespaceResized{next.nqn, nc, old->size});
    } else {
      out.push_back(change::NamespaceReplaced{next.nqn, nc});
    }
  }
  std::vector<uint32_t> removed;
  for (const auto& nc : running.namespaces)
    if (find_namespace(next, nc.nsid) == nullptr) removed.push_back(nc.nsid);
  std::sort(removed.begin(), removed.end());
  for (uint32_t nsid : removed) out.push_back(change::NamespaceRemoved{next.nqn, nsid});
}

// A subsystem in both configs. Returns whether the discovery log changes (it lists a subsystem to the hosts
// allowed on it).
bool plan_subsystem(const SubsystemConfig& running, const SubsystemConfig& next, ChangeList& out) {
  const bool hosts = running.allow_any_host != next.allow_any_host || running.hosts != next.hosts;
  if (hosts) out.push_back(change::HostsChanged{next.nqn, next.allow_any_host, next.hosts});
  if (!same_settings(running, next)) out.push_back(change::SettingsChanged{next});
  plan_namespaces(running, next, out);
  return hosts;
}

// Returns whether the discovery log changes.
bool plan_listeners(const std::vector<ListenerConfig>& running, const std::vector<ListenerConfig>& next,
                    ChangeList& out) {
  const bool endpoints_changed = !std::equal(running.begin(), running.end(), next.begin(), next.end(), same_key);
  if (!std::equal(running.begin(), running.end(), next.begin(), next.end(), same_listener))
    out.push_back(change::ListenersChanged{next, endpoints_changed});
  for (const auto& l : next) {
    auto old = std::find_if(running.begin(), running.end(), [&](const ListenerConfig& r) { return same_key(r, l); });
    if (old == running.end()) continue;  // a new listener: nobody is on it yet, nothing changed for anyone
    for (uint32_t g = 1; g <= kAnaGroupMax; ++g) {
      if (old->ana_state(g) != l.ana_state(g))
        out.push_back(change::AnaStateChanged{listener_key(l), g, old->ana_state(g), l.ana_state(g)});
    }
  }
  return endpoints_changed;
}

std::string describe_listener(const ListenerKey& k) {
  const bool v6 = k.address.find(':') != std::string::npos;
  return fmt::format("{} {}{}{}:{}{}", transport::transport_name(k.transport), v6 ? "[" : "", k.address, v6 ? "]" : "",
                     k.port, k.role == ListenerRole::discovery ? " (discovery)" : "");
}

}  // namespace

ListenerKey listener_key(const ListenerConfig& listener) {
  return {listener.transport, listener.address, listener.port, listener.role};
}

bool same_backend(const NamespaceConfig& a, const NamespaceConfig& b) noexcept {
  return a.nsid == b.nsid && a.backend == b.backend && a.path == b.path && a.size == b.size &&
         a.block_size == b.block_size && a.direct == b.direct && a.read_only == b.read_only && a.uuid == b.uuid &&
         a.nguid == b.nguid && a.pool == b.pool && a.image == b.image && a.rados_namespace == b.rados_namespace &&
         a.ceph_conf == b.ceph_conf && a.client == b.client && a.keyring == b.keyring;
}

ChangeList plan_changes(const TargetConfig& running, const TargetConfig& next) {
  ChangeList out;
  bool discovery = false;
  for (const auto& sc : next.subsystems) {
    if (const SubsystemConfig* old = find_subsystem(running, sc.nqn)) {
      discovery |= plan_subsystem(*old, sc, out);
    } else {
      out.push_back(change::SubsystemAdded{sc});
      discovery = true;
    }
  }
  std::vector<const SubsystemConfig*> removed;
  for (const auto& sc : running.subsystems)
    if (find_subsystem(next, sc.nqn) == nullptr) removed.push_back(&sc);
  std::sort(removed.begin(), removed.end(), [](const auto* a, const auto* b) { return a->nqn < b->nqn; });
  for (const auto* sc : removed) {
    out.push_back(change::SubsystemRemoved{sc->nqn, static_cast<unsigned>(sc->namespaces.size())});
    discovery = true;
  }
  discovery |= plan_listeners(running.listeners, next.listeners, out);
  if (discovery) out.push_back(change::DiscoveryLogChanged{});
  return out;
}

void apply_to_config(TargetConfig& config, const ChangeList& changes) {
  auto edit = [&](const std::string& nqn, auto&& fn) {
    if (SubsystemConfig* sc = find_subsystem(config, nqn)) fn(*sc);
  };
  auto set_namespace = [&](const std::string& nqn, const NamespaceConfig& nc) {
    edit(nqn, [&](SubsystemConfig& sc) {
      if (NamespaceConfig* old = find_namespace(sc, nc.nsid)) *old = nc;
    });
  };
  for (const Change& c : changes) {
    std::visit(Overloaded{
                   [&](const change::SubsystemAdded& a) { config.subsystems.push_back(a.config); },
                   [&](const change::SubsystemRemoved& r) {
                     std::erase_if(config.subsystems, [&](const SubsystemConfig& s) { return s.nqn == r.nqn; });
                   },
                   [&](const change::HostsChanged& h) {
                     edit(h.nqn, [&](SubsystemConfig& sc) {
                       sc.allow_any_host = h.allow_any_host;
                       sc.hosts = h.hosts;
                     });
                   },
                   [&](const change::SettingsChanged& s) {
                     edit(s.config.nqn, [&](SubsystemConfig& sc) {
                       sc.model = s.config.model;
                       sc.require_authentication = s.config.require_authentication;
                       sc.host_configs = s.config.host_configs;
                       sc.cntlid_min = s.config.cntlid_min;
                       sc.cntlid_max = s.config.cntlid_max;
                     });
                   },
                   [&](const change::NamespaceAdded& a) {
                     edit(a.nqn, [&](SubsystemConfig& sc) { sc.namespaces.push_back(a.config); });
                   },
                   [&](const change::NamespaceReplaced& r) { set_namespace(r.nqn, r.config); },
                   [&](const change::NamespaceResized& r) { set_namespace(r.nqn, r.config); },
                   [&](const change::NamespaceRemoved& r) {
                     edit(r.nqn, [&](SubsystemConfig& sc) {
                       std::erase_if(sc.namespaces, [&](const NamespaceConfig& n) { return n.nsid == r.nsid; });
                     });
                   },
                   [&](const change::NamespaceMoved& m) {
                     edit(m.nqn, [&](SubsystemConfig& sc) {
                       if (NamespaceConfig* nc = find_namespace(sc, m.nsid)) nc->ana_group = m.to_group;
                     });
                   },
                   [&](const change::NamespaceMasked& m) {
                     edit(m.nqn, [&](SubsystemConfig& sc) {
                       if (NamespaceConfig* nc = find_namespace(sc, m.nsid)) nc->hosts = m.to;
                     });
                   },
                   [&](const change::QosChanged& q) {
                     edit(q.nqn, [&](SubsystemConfig& sc) {
                       if (NamespaceConfig* nc = find_namespace(sc, q.nsid)) nc->qos = q.to;
                     });
                   },
                   [&](const change::ListenersChanged& l) { config.listeners = l.listeners; },
                   [](const change::AnaStateChanged&) {},
                   [](const change::DiscoveryLogChanged&) {},
               },
               c);
  }
}

const std::string* edited_subsystem(const Change& change) noexcept {
  return std::visit(Overloaded{
                        [](const change::HostsChanged& c) { return &c.nqn; },
                        [](const change::SettingsChanged& c) { return &c.config.nqn; },
                        [](const change::NamespaceAdded& c) { return &c.nqn; },
                        [](const change::NamespaceReplaced& c) { return &c.nqn; },
                        [](const change::NamespaceResized& c) { return &c.nqn; },
                        [](const change::NamespaceRemoved& c) { return &c.nqn; },
                        [](const change::NamespaceMoved& c) { return &c.nqn; },
                        [](const change::NamespaceMasked& c) { return &c.nqn; },
                        [](const change::QosChanged& c) { return &c.nqn; },
                        [](const auto&) -> const std::string* { return nullptr; },
                    },
                    change);
}

namespace {
// "unlimited", or e.g. "iops 5000 mbps 200 [nqn.h: iops 1000]".
std::string describe_qos(const NamespaceQosConfig& q) {
  auto limits = [](const QosLimits& l) {
    std::vector<std::string> parts;
    if (l.iops != 0) parts.push_back(fmt::format("iops {}", l.iops));
    if (l.mbps != 0) parts.push_back(fmt::format("mbps {}", l.mbps));
    if (l.read_mbps != 0) parts.push_back(fmt::format("read_mbps {}", l.read_mbps));
    if (l.write_mbps != 0) parts.push_back(fmt::format("write_mbps {}", l.write_mbps));
    return parts.empty() ? std::string("unlimited") : fmt::format("{}", fmt::join(parts, " "));
  };
  std::string out = limits(q.limits);
  for (const HostQosConfig& h : q.hosts) out += fmt::format(" [{}: {}]", h.host, limits(h.limits));
  return out;
}
}  // namespace

std::string describe(const Change& change) {
  return std::visit(
      Overloaded{
          [](const change::SubsystemAdded& c) {
            return fmt::format("subsystem added {} ({} namespaces)", c.config.nqn, c.config.namespaces.size());
          },
          [](const change::SubsystemRemoved& c) {
            return fmt::format("subsystem removed {} ({} namespaces)", c.nqn, c.namespaces);
          },
          [](const change::HostsChanged& c) {
            return fmt::format("hosts changed {}: {}", c.nqn,
                               c.allow_any_host ? std::string("any") : fmt::format("{}", fmt::join(c.hosts, ", ")));
          },
          [](const change::SettingsChanged& c) { return fmt::format("settings changed {}", c.config.nqn); },
          [](const change::NamespaceAdded& c) { return fmt::format("namespace added {}:{}", c.nqn, c.config.nsid); },
          [](const change::NamespaceReplaced& c) {
            return fmt::format("namespace replaced {}:{}", c.nqn, c.config.nsid);
          },
          [](const change::NamespaceResized& c) {
            return fmt::format("namespace resized {}:{} {} -> {}", c.nqn, c.config.nsid, format_size(c.old_size),
                               format_size(c.config.size));
          },
          [](const change::NamespaceRemoved& c) { return fmt::format("namespace removed {}:{}", c.nqn, c.nsid); },
          [](const change::NamespaceMoved& c) {
            return fmt::format("namespace moved {}:{} ANA group {} -> {}", c.nqn, c.nsid, c.from_group, c.to_group);
          },
          [](const change::NamespaceMasked& c) {
            auto who = [](const std::vector<std::string>& h) {
              return h.empty() ? std::string("every allowed host") : fmt::format("{}", fmt::join(h, ", "));
            };
            return fmt::format("namespace masked {}:{} {} -> {}", c.nqn, c.nsid, who(c.from), who(c.to));
          },
          [](const change::QosChanged& c) {
            return fmt::format("namespace QoS changed {}:{} {} -> {}", c.nqn, c.nsid, describe_qos(c.from),
                               describe_qos(c.to));
          },
          [](const change::ListenersChanged& c) {
            return fmt::format("listeners changed{}", c.endpoints_changed ? " (endpoints)" : "");
          },
          [](const change::AnaStateChanged& c) {
            return fmt::format("ANA state {} group {}: {} -> {}", describe_listener(c.listener), c.group,
                               ana_state_config_name(c.from), ana_state_config_name(c.to));
          },
          [](const change::DiscoveryLogChanged&) { return std::string("discovery log changed"); },
      },
      change);
}

std::string ReloadSummary::describe() const {
  return fmt::format(
      "subsystems +{} -{}, namespaces +{} -{} ~{}, host lists changed {}, masks changed {}, QoS changed {}, "
      "controllers dropped {}, ANA changes {}, discovery log {}",
      subsystems_added, subsystems_removed, namespaces_added, namespaces_removed, namespaces_changed,
      host_lists_changed, masks_changed, qos_changed, controllers_dropped, ana_changes, discovery_changed ? "changed" : "unchanged");
}

ReloadSummary summarize(const ChangeList& changes) {
  ReloadSummary s;
  for (const Change& c : changes) {
    std::visit(Overloaded{
                   [&](const change::SubsystemAdded& a) {
                     ++s.subsystems_added;
                     s.namespaces_added += static_cast<unsigned>(a.config.namespaces.size());
                   },
                   [&](const change::SubsystemRemoved& r) {
                     ++s.subsystems_removed;
                     s.namespaces_removed += r.namespaces;
                   },
                   [&](const change::HostsChanged&) { ++s.host_lists_changed; },
                   [&](const change::NamespaceAdded&) { ++s.namespaces_added; },
                   [&](const change::NamespaceReplaced&) { ++s.namespaces_changed; },
                   [&](const change::NamespaceResized&) { ++s.namespaces_changed; },
                   [&](const change::NamespaceRemoved&) { ++s.namespaces_removed; },
                   [&](const change::NamespaceMoved&) { ++s.ana_changes; },
                   [&](const change::NamespaceMasked&) { ++s.masks_changed; },
                   [&](const change::QosChanged&) { ++s.qos_changed; },
                   [&](const change::AnaStateChanged&) { ++s.ana_changes; },
                   [&](const change::DiscoveryLogChanged&) { s.discovery_changed = true; },
                   [](const auto&) {},
               },
               c);
  }
  return s;
}

}  // namespace rdmablk::target
