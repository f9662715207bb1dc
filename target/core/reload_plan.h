// A reload as a plan: the typed differences between the configuration that runs and a new one, computed
// from the two configs alone (no sockets, reactors, backends or locks), and the counts they add up to.
// The core carries a ChangeList out (TargetCore::apply_changes); a reload is plan_changes + apply_changes,
// and the live-management API builds its lists the same way.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "protocol/ana.h"
#include "target/config/config.h"

namespace rdmablk::target {

// What identifies a listener across a reload. A listener with the same key keeps its ANA port (the queues
// on it hold that port); any other key is a new listener.
struct ListenerKey {
  transport::TransportType transport = transport::TransportType::tcp;
  std::string address;
  uint16_t port = 0;
  ListenerRole role = ListenerRole::io;
  friend bool operator==(const ListenerKey&, const ListenerKey&) = default;
};
ListenerKey listener_key(const ListenerConfig& listener);

// True when both configs give the same namespace, so a reload keeps its backend: every key counts but
// ana_group (a move keeps the backend) and the source locations. Namespace::same_config is this.
bool same_backend(const NamespaceConfig& a, const NamespaceConfig& b) noexcept;

// One change each; every change names the subsystem it is about by NQN.
namespace change {
// A new subsystem: every namespace is opened.
struct SubsystemAdded {
  SubsystemConfig config;
};
// Its controllers are disconnected.
struct SubsystemRemoved {
  std::string nqn;
  unsigned namespaces = 0;
};
// allow_any_host or the host list: controllers of hosts no longer allowed are disconnected.
struct HostsChanged {
  std::string nqn;
  bool allow_any_host = false;
  std::vector<std::string> hosts;
};
// Model, authentication, TLS PSK sources, controller ID range: new controllers use them, connected ones keep
// theirs (config: the whole new subsystem config; the host list is HostsChanged's).
struct SettingsChanged {
  SubsystemConfig config;
};
struct NamespaceAdded {
  std::string nqn;
  NamespaceConfig config;
};
// A new backend under the same NSID.
struct NamespaceReplaced {
  std::string nqn;
  NamespaceConfig config;
};
// Only the size differs; applied as a replacement (the backend is opened again at the new size).
struct NamespaceResized {
  std::string nqn;
  NamespaceConfig config;
  uint64_t old_size = 0;
};
struct NamespaceRemoved {
  std::string nqn;
  uint32_t nsid = 0;
};
// To another ANA group: the same backend, an ANA Change event rather than Namespace Attribute Changed.
struct NamespaceMoved {
  std::string nqn;
  uint32_t nsid = 0;
  uint32_t from_group = 0;
  uint32_t to_group = 0;
};
// Who sees it (NamespaceConfig::hosts, sorted; empty = every allowed host): the same backend; Namespace
// Attribute Changed goes only to the controllers whose view of it changed.
struct NamespaceMasked {
  std::string nqn;
  uint32_t nsid = 0;
  std::vector<std::string> from;
  std::vector<std::string> to;
};
// Its QoS limits (NamespaceConfig::qos): the same backend, the new limits live on every reactor; no event.
struct QosChanged {
  std::string nqn;
  uint32_t nsid = 0;
  NamespaceQosConfig from;
  NamespaceQosConfig to;
};
// The listener table (endpoints, roles, TLS, ANA keys). A listener whose key was there keeps its ANA port and
// its states (AnaStateChanged moves them); a new one starts with its configured states.
// endpoints_changed: the keys or their order differ, which the discovery log shows and which can leave an
// I/O controller on a listener that is now discovery-only (it is disconnected).
struct ListenersChanged {
  std::vector<ListenerConfig> listeners;
  bool endpoints_changed = false;
};
// The state of one group on one kept listener.
struct AnaStateChanged {
  ListenerKey listener;
  uint32_t group = 0;
  protocol::AnaState from = protocol::AnaState::optimized;
  protocol::AnaState to = protocol::AnaState::optimized;
};
// What the discovery log lists changed: discovery controllers get a Discovery Log Change event.
struct DiscoveryLogChanged {};
}  // namespace change

using Change =
    std::variant<change::SubsystemAdded, change::SubsystemRemoved, change::HostsChanged, change::SettingsChanged,
                 change::NamespaceAdded, change::NamespaceReplaced, change::NamespaceResized, change::NamespaceRemoved,
                 change::NamespaceMoved, change::NamespaceMasked, change::QosChanged, change::ListenersChanged,
                 change::AnaStateChanged, change::DiscoveryLogChanged>;
using ChangeList = std::vector<Change>;

// The changes that turn `running` into `next`, in the order the core applies them:
//   for each subsystem of `next`, in its order: SubsystemAdded, or HostsChanged, SettingsChanged and the
//     namespace changes (in `next`'s namespace order, then the removals by NSID);
//   SubsystemRemoved by NQN;
//   ListenersChanged, then AnaStateChanged by listener (in `next`'s order) and group;
//   DiscoveryLogChanged last, when a subsystem came or went, a host list or a listener key changed.
// Only what a reload applies counts: not the serial (the running target keeps the one it started the subsystem
// with), limits, reactors, control, metrics. Empty: nothing to do.
ChangeList plan_changes(const TargetConfig& running, const TargetConfig& next);

// `config` with `changes` carried out: the configuration that runs once the core applied them
// (plan_changes(result, next) is then empty). AnaStateChanged changes only the ports: the listeners' `ana`
// keys come with ListenersChanged.
void apply_to_config(TargetConfig& config, const ChangeList& changes);

// The subsystem a change edits in place (hosts, settings, namespaces), else nullptr.
const std::string* edited_subsystem(const Change& change) noexcept;

// One line for logs and tests, e.g. "namespace added nqn.x:3".
std::string describe(const Change& change);

// What a reload changed (for the log line).
struct ReloadSummary {
  unsigned subsystems_added = 0;
  unsigned subsystems_removed = 0;
  unsigned namespaces_added = 0;
  unsigned namespaces_removed = 0;
  unsigned namespaces_changed = 0;   // replaced: a new backend under the same NSID (resized ones too)
  unsigned masks_changed = 0;        // namespaces whose host list (masking) changed
  unsigned qos_changed = 0;          // namespaces whose QoS limits changed
  unsigned host_lists_changed = 0;
  unsigned controllers_dropped = 0;  // hosts no longer allowed, subsystems removed, listener now discovery-only
  unsigned ana_changes = 0;          // group states changed on a listener + namespaces moved to another group
  bool discovery_changed = false;
  std::string describe() const;
};

// The counts of a change list; controllers_dropped stays 0 (the applier counts it: it depends on who is
// connected).
ReloadSummary summarize(const ChangeList& changes);

}  // namespace rdmablk::target
