// The ANA registry (ana_registry.h): the ports of the listeners, the change count and the ANA log page.
#include "target/core/ana_registry.h"

#include <algorithm>
#include <map>
#include <set>

#include "target/core/core_internal.h"

namespace rdmablk::target {

AnaRegistry::AnaRegistry(const std::vector<ListenerConfig>& listeners) : listeners_(listeners) {
  for (const auto& l : listeners_) {
    auto port = std::make_shared<AnaPort>();
    apply_config(*port, l);
    ports_.push_back(std::move(port));
  }
}

unsigned AnaRegistry::apply_config(AnaPort& port, const ListenerConfig& listener) noexcept {
  unsigned changed = 0;
  for (uint32_t g = 1; g <= kAnaGroupMax; ++g) changed += port.set(g, listener.ana_state(g)) ? 1 : 0;
  return changed;
}

std::shared_ptr<AnaPort> AnaRegistry::port_for(const transport::TransportAddress& local) const {
  std::lock_guard lock(mu_);
  const int i = find_listener(listeners_, local);
  if (i >= 0 && static_cast<std::size_t>(i) < ports_.size()) return ports_[static_cast<std::size_t>(i)];
  return default_port_;
}

void AnaRegistry::take_listeners(const std::vector<ListenerConfig>& listeners) {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<AnaPort>> ports;
  for (const auto& l : listeners) {
    std::shared_ptr<AnaPort> port;
    for (std::size_t j = 0; j < listeners_.size() && j < ports_.size() && !port; ++j)
      if (listener_key(listeners_[j]) == listener_key(l)) port = ports_[j];
    if (!port) {  // a new listener: its states as configured
      port = std::make_shared<AnaPort>();
      apply_config(*port, l);
    }
    ports.push_back(std::move(port));
  }
  listeners_ = listeners;
  ports_ = std::move(ports);
}

std::optional<std::vector<const AnaPort*>> AnaRegistry::set_state(std::string_view address, uint16_t port,
                                                                  uint32_t group, protocol::AnaState state) {
  std::lock_guard lock(mu_);
  std::vector<const AnaPort*> changed;
  bool found = false;
  for (std::size_t i = 0; i < listeners_.size() && i < ports_.size(); ++i) {
    const auto& l = listeners_[i];
    if (l.role != ListenerRole::io || l.port != port || l.address != address) continue;
    found = true;
    if (ports_[i]->set(group, state)) changed.push_back(ports_[i].get());
  }
  if (!found) return std::nullopt;
  if (!changed.empty()) ++chgcnt_;
  return changed;
}

const AnaPort* AnaRegistry::set_listener_state(const ListenerKey& key, uint32_t group, protocol::AnaState state) {
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < listeners_.size() && i < ports_.size(); ++i) {
    if (listener_key(listeners_[i]) != key) continue;
    return ports_[i]->set(group, state) ? ports_[i].get() : nullptr;
  }
  return nullptr;
}

void AnaRegistry::bump_change_count() {
  std::lock_guard lock(mu_);
  ++chgcnt_;
}

uint64_t AnaRegistry::change_count() const {
  std::lock_guard lock(mu_);
  return chgcnt_;
}

void AnaRegistry::overlay_live_states(std::vector<ListenerConfig>& listeners) const {
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < listeners.size() && i < ports_.size(); ++i) {
    ListenerConfig& listener = listeners[i];
    for (uint32_t g = 1; g <= kAnaGroupMax; ++g) {
      const protocol::AnaState live = ports_[i]->get(g);
      if (listener.ana_state(g) == live) continue;
      auto it = std::find_if(listener.ana.begin(), listener.ana.end(),
                             [g](const AnaGroupState& a) { return a.group >= g; });
      if (it != listener.ana.end() && it->group == g) {
        it->state = live;
      } else {
        listener.ana.insert(it, AnaGroupState{g, live, {}});
      }
    }
  }
}

std::vector<uint8_t> AnaRegistry::log_page(const AnaPort* port, const NamespaceTable& table, std::string_view hostnqn,
                                           bool groups_only) const {
  std::lock_guard lock(mu_);
  std::set<uint32_t> ids{kDefaultAnaGroup};
  for (const auto& l : listeners_)
    for (const auto& a : l.ana) ids.insert(a.group);
  std::map<uint32_t, std::vector<uint32_t>> members;
  for (const auto& ns : table.namespaces) {  // sorted by NSID: each list is ascending
    if (!ns->config.visible_to(hostnqn)) continue;
    const uint32_t g = ns->ana_group.load(std::memory_order_relaxed);
    ids.insert(g);
    members[g].push_back(ns->nsid);
  }
  const AnaPort& states = port != nullptr ? *port : *default_port_;
  std::vector<protocol::AnaGroupEntry> groups;
  for (uint32_t g : ids) {
    protocol::AnaGroupEntry e;
    e.anagrpid = g;
    e.state = states.get(g);
    e.chgcnt = chgcnt_;  // one target-wide count, as nvmet's nvmet_ana_chgcnt
    if (auto it = members.find(g); it != members.end()) e.nsids = std::move(it->second);
    groups.push_back(std::move(e));
  }
  return protocol::make_ana_log(chgcnt_, groups, groups_only);
}

}  // namespace rdmablk::target
