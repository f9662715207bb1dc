// The applier: carries a ChangeList (reload_plan.h) out on the running core. Backends are opened first,
// outside the lock (file backends may block, librbd waits on the cluster); then, under the lock, the tables,
// hosts, settings, listeners and ANA states change and events and disconnects are queued; the new tables go to
// the reactors and the events out once every reactor has them (publish_tables).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <utility>

#include "target/core/core.h"
#include "target/core/core_internal.h"
#include "target/core/reload_plan.h"

namespace rdmablk::target {

// What a change list needs opened, opened before anything changes.
struct TargetCore::OpenedBackends {
  std::map<std::string, std::shared_ptr<Subsystem>, std::less<>> subsystems;          // SubsystemAdded
  std::map<std::pair<std::string, uint32_t>, std::shared_ptr<Namespace>> namespaces;  // added, replaced, resized
};

// What applying collects under the lock: closes run once it is released, events go out once every reactor
// has the new tables.
struct TargetCore::Applying {
  uint64_t generation = 0;
  unsigned controllers_dropped = 0;
  std::vector<std::function<void()>> after;
  EventReleases notify;
  TableUpdates tables;
  std::vector<const AnaPort*> ana_ports;         // a group state changed on it
  std::vector<const Subsystem*> ana_subsystems;  // a namespace moved to another group
  bool endpoints_changed = false;
  bool discovery_changed = false;
  std::vector<ListenerConfig> removed_listeners;  // endpoints no longer listened on
};

namespace {

// The namespace config a change opens a backend for (added, replaced, resized), else nullptr.
const NamespaceConfig* namespace_to_open(const Change& c) {
  if (const auto* a = std::get_if<change::NamespaceAdded>(&c)) return &a->config;
  if (const auto* r = std::get_if<change::NamespaceReplaced>(&c)) return &r->config;
  if (const auto* r = std::get_if<change::NamespaceResized>(&c)) return &r->config;
  return nullptr;
}

}  // namespace

TargetConfig TargetCore::running_config() const {
  std::lock_guard lock(mu_);
  TargetConfig config;
  config.subsystems = subsystem_configs_;
  config.listeners = listeners_;
  ana_.overlay_live_states(config.listeners);
  config.state_dir = namespace_hooks_.state_dir.string();
  return config;
}

Result<ReloadSummary> TargetCore::reload(const TargetConfig& config) {
  auto summary = apply_changes(plan_changes(running_config(), config));
  if (summary) spdlog::info("configuration reloaded: {}", summary->describe());
  return summary;
}

Result<ReloadSummary> TargetCore::apply_changes(const ChangeList& changes) {
  Applying st;
  {
    std::lock_guard lock(mu_);
    st.generation = ++table_generation_;
  }
  auto opened = open_backends(changes, st.generation);
  if (!opened) return tl::unexpected(opened.error());
  {
    std::lock_guard lock(mu_);
    apply_locked(changes, *opened, st);
    TargetConfig running;
    running.subsystems = std::move(subsystem_configs_);
    apply_to_config(running, changes);
    subsystem_configs_ = std::move(running.subsystems);
  }
  publish_tables(st.tables, std::move(st.notify));
  for (auto& fn : st.after) fn();
  ReloadSummary summary = summarize(changes);
  summary.controllers_dropped = st.controllers_dropped;
  return summary;
}

Result<TargetCore::OpenedBackends> TargetCore::open_backends(const ChangeList& changes, uint64_t generation) const {
  OpenedBackends out;
  for (const Change& c : changes) {
    if (const auto* added = std::get_if<change::SubsystemAdded>(&c)) {
      auto sub = build_subsystem(added->config, generation, namespace_hooks_);
      if (!sub) return tl::unexpected(sub.error());
      out.subsystems.emplace(added->config.nqn, std::move(*sub));
      continue;
    }
    const NamespaceConfig* nc = namespace_to_open(c);
    if (nc == nullptr) continue;
    const std::string& nqn = *edited_subsystem(c);
    auto ns = open_namespace(*nc, nqn, namespace_hooks_);
    if (!ns) return make_error(fmt::format("subsystem {}: {}", nqn, ns.error().message), ns.error().errno_value);
    out.namespaces.emplace(std::make_pair(nqn, nc->nsid), std::move(*ns));
  }
  return out;
}

void TargetCore::apply_locked(const ChangeList& changes, OpenedBackends& opened, Applying& st) {
  std::vector<const std::string*> edited;
  for (const Change& c : changes) {
    // All edits of a subsystem at once (plan_changes makes them adjacent): one new table, one event each.
    if (const std::string* nqn = edited_subsystem(c)) {
      if (std::any_of(edited.begin(), edited.end(), [&](const std::string* n) { return *n == *nqn; })) continue;
      edited.push_back(nqn);
      std::vector<const Change*> edits;
      for (const Change& e : changes)
        if (const std::string* n = edited_subsystem(e); n != nullptr && *n == *nqn) edits.push_back(&e);
      edit_subsystem_locked(*nqn, edits, opened, st);
      continue;
    }
    if (const auto* added = std::get_if<change::SubsystemAdded>(&c)) {
      auto it = opened.subsystems.find(added->config.nqn);
      if (it != opened.subsystems.end()) subsystems_.emplace(it->first, it->second);  // kept if already there
    } else if (const auto* removed = std::get_if<change::SubsystemRemoved>(&c)) {
      remove_subsystem_locked(removed->nqn, st);
    } else if (const auto* listeners = std::get_if<change::ListenersChanged>(&c)) {
      take_listeners_locked(*listeners, st);
    } else if (const auto* ana = std::get_if<change::AnaStateChanged>(&c)) {
      apply_ana_state_locked(*ana, st);
    } else if (std::holds_alternative<change::DiscoveryLogChanged>(c)) {
      st.discovery_changed = true;
    }
  }
  finish_apply_locked(st);
}

void TargetCore::edit_subsystem_locked(const std::string& nqn, const std::vector<const Change*>& edits,
                                       OpenedBackends& opened, Applying& st) {
  auto it = subsystems_.find(nqn);
  if (it == subsystems_.end()) return;  // planned against another running config
  Subsystem& sub = *it->second;
  const std::shared_ptr<const NamespaceTable> before = sub.table;
  auto table = std::make_shared<NamespaceTable>(*sub.table);  // as it is now: a resize may have replaced one
  table->generation = st.generation;
  std::vector<uint32_t> changed;  // the Changed Namespace List: added, removed, replaced
  std::vector<uint32_t> masked;   // seen by other hosts now
  bool requalified = false;       // QoS limits changed
  auto erase_nsid = [&](uint32_t nsid) {
    std::erase_if(table->namespaces, [nsid](const auto& ns) { return ns->nsid == nsid; });
  };
  for (const Change* edit : edits) {
    const Change& c = *edit;
    if (const auto* hosts = std::get_if<change::HostsChanged>(&c)) {
      sub.allow_any_host = hosts->allow_any_host;
      sub.hosts = hosts->hosts;
    } else if (const auto* settings = std::get_if<change::SettingsChanged>(&c)) {
      // New connections use them; connected controllers keep theirs.
      sub.require_authentication = settings->config.require_authentication;
      sub.host_auth = host_auth_of(settings->config);
      sub.tls_psk_sources = tls_psk_sources_of(settings->config);
      sub.model = settings->config.model;
      sub.cntlid_min = settings->config.cntlid_min;
      sub.cntlid_max = settings->config.cntlid_max;
    } else if (const auto* moved = std::get_if<change::NamespaceMoved>(&c)) {
      // The same backend, an ANA Change event (nvmet's ana_grpid store).
      auto ns = std::find_if(table->namespaces.begin(), table->namespaces.end(),
                             [&](const auto& n) { return n->nsid == moved->nsid; });  // not sorted yet
      if (ns != table->namespaces.end() &&
          (*ns)->ana_group.exchange(moved->to_group, std::memory_order_relaxed) != moved->to_group &&
          std::find(st.ana_subsystems.begin(), st.ana_subsystems.end(), &sub) == st.ana_subsystems.end())
        st.ana_subsystems.push_back(&sub);
    } else if (const auto* m = std::get_if<change::NamespaceMasked>(&c)) {
      auto ns = std::find_if(table->namespaces.begin(), table->namespaces.end(),
                             [&](const auto& n) { return n->nsid == m->nsid; });
      if (ns == table->namespaces.end()) continue;
      *ns = masked_namespace(**ns, m->to);
      masked.push_back(m->nsid);
    } else if (const auto* q = std::get_if<change::QosChanged>(&c)) {
      auto ns = std::find_if(table->namespaces.begin(), table->namespaces.end(),
                             [&](const auto& n) { return n->nsid == q->nsid; });
      if (ns == table->namespaces.end()) continue;
      *ns = qos_namespace(**ns, q->to);  // no event: hosts see nothing of a limit
      requalified = true;
    } else if (const auto* removed = std::get_if<change::NamespaceRemoved>(&c)) {
      erase_nsid(removed->nsid);
      changed.push_back(removed->nsid);
    } else if (const NamespaceConfig* nc = namespace_to_open(c)) {
      auto ns = opened.namespaces.find({nqn, nc->nsid});
      if (ns == opened.namespaces.end()) continue;  // cannot happen: opened before
      erase_nsid(nc->nsid);
      table->namespaces.push_back(ns->second);
      changed.push_back(nc->nsid);
    }
  }
  std::sort(table->namespaces.begin(), table->namespaces.end(),
            [](const auto& a, const auto& b) { return a->nsid < b->nsid; });
  std::sort(changed.begin(), changed.end());
  std::sort(masked.begin(), masked.end());
  if (!changed.empty() || !masked.empty() || requalified) {
    sub.table = table;
    st.tables.emplace_back(it->second, table);
  }
  notify_subsystem_locked(sub, NamespaceChanges{*before, *table, changed, masked}, st);
}

std::vector<uint32_t> TargetCore::NamespaceChanges::seen_by(std::string_view hostnqn) const {
  auto sees = [&](const NamespaceTable& t, uint32_t nsid) {
    const auto* ns = t.find(nsid);
    return ns != nullptr && (*ns)->config.visible_to(hostnqn);
  };
  std::vector<uint32_t> out;
  for (uint32_t nsid : changed)  // added, removed, replaced: news to a host that sees it before or after
    if (sees(before, nsid) || sees(after, nsid)) out.push_back(nsid);
  for (uint32_t nsid : masked)  // news only where it appeared or disappeared
    if (sees(before, nsid) != sees(after, nsid)) out.push_back(nsid);
  std::sort(out.begin(), out.end());
  return out;
}

void TargetCore::notify_subsystem_locked(Subsystem& sub, const NamespaceChanges& changes, Applying& st) {
  for (auto cit = controllers_.begin(); cit != controllers_.end();) {
    auto ctrl = cit++->second;  // teardown erases from controllers_
    if (ctrl->discovery || ctrl->subsys.get() != &sub) continue;
    if (!sub.host_allowed(ctrl->hostnqn)) {
      spdlog::info("controller {}: host {} is no longer allowed on {}: disconnecting", ctrl->cntlid, ctrl->hostnqn,
                   sub.nqn);
      teardown_locked(ctrl, "host no longer allowed", st.after);
      ++st.controllers_dropped;
      continue;
    }
    const std::vector<uint32_t> changed = changes.seen_by(ctrl->hostnqn);
    if (changed.empty()) continue;
    ControllerRegistry::note_changed_namespaces(*ctrl, changed);
    st.notify.push_back(ControllerRegistry::release_of(ctrl));
  }
}

void TargetCore::remove_subsystem_locked(const std::string& nqn, Applying& st) {
  auto it = subsystems_.find(nqn);
  if (it == subsystems_.end()) return;
  auto sub = it->second;
  sub->removed = true;
  for (auto cit = controllers_.begin(); cit != controllers_.end();) {
    auto ctrl = cit++->second;
    if (ctrl->subsys != sub) continue;
    teardown_locked(ctrl, "subsystem removed", st.after);
    ++st.controllers_dropped;
  }
  auto empty = std::make_shared<NamespaceTable>();
  empty->generation = st.generation;
  sub->table = empty;
  st.tables.emplace_back(sub, empty);
  subsystems_.erase(it);
}

void TargetCore::take_listeners_locked(const change::ListenersChanged& c, Applying& st) {
  for (const auto& l : listeners_) {
    const bool kept = std::any_of(c.listeners.begin(), c.listeners.end(), [&](const ListenerConfig& n) {
      return n.transport == l.transport && n.address == l.address && n.port == l.port;
    });
    if (!kept) st.removed_listeners.push_back(l);
  }
  ana_.take_listeners(c.listeners);  // a listener at the same endpoint keeps its port
  listeners_ = c.listeners;
  st.endpoints_changed = st.endpoints_changed || c.endpoints_changed;
}

void TargetCore::apply_ana_state_locked(const change::AnaStateChanged& c, Applying& st) {
  const AnaPort* port = ana_.set_listener_state(c.listener, c.group, c.to);
  if (port != nullptr && std::find(st.ana_ports.begin(), st.ana_ports.end(), port) == st.ana_ports.end())
    st.ana_ports.push_back(port);
}

// A listener removed (nvmet deletes a port's controllers, SPDK disconnects a removed listener's qpairs) or
// become discovery-only (nvmet: unlinking a subsystem from a port disconnects its controllers there): the
// controllers with a queue on it go, so that their hosts fail over to a path that is still offered.
void TargetCore::drop_controllers_off_their_listener_locked(Applying& st) {
  auto removed = [&](const transport::TransportAddress& local) {
    return find_listener(st.removed_listeners, local) >= 0 && find_listener(listeners_, local) < 0;
  };
  for (auto cit = controllers_.begin(); cit != controllers_.end();) {
    auto ctrl = cit++->second;
    if (ctrl->dead) continue;
    bool gone = removed(ctrl->local_address);
    bool discovery_only = !ctrl->discovery && !serves_subsystems_locked(ctrl->local_address);
    for (const auto& w : ctrl->io_queue_table) {
      if (gone || discovery_only) break;
      if (auto q = w.lock()) {
        gone = removed(q->local);
        discovery_only = !serves_subsystems_locked(q->local);
      }
    }
    if (!gone && !discovery_only) continue;
    const char* why = gone ? "its listener was removed" : "its listener serves the discovery controller only";
    spdlog::info("controller {}: {}: disconnecting", ctrl->cntlid, why);
    teardown_locked(ctrl, gone ? "listener removed" : "listener is discovery-only", st.after);
    ++st.controllers_dropped;
  }
}

// What concerns every controller, once every change is in: ANA Change events, controllers left on a
// discovery-only listener, Discovery Log Change events.
void TargetCore::finish_apply_locked(Applying& st) {
  if (!st.ana_ports.empty() || !st.ana_subsystems.empty()) {
    ana_.bump_change_count();
    queue_ana_events_locked(st.ana_ports, st.ana_subsystems, st.notify);
  }
  if (st.endpoints_changed) drop_controllers_off_their_listener_locked(st);
  if (st.discovery_changed) discovery_changed_locked(st.notify);
}

}  // namespace rdmablk::target
