// Asymmetric Namespace Access (NVMe Base 2.0, 8.20), as nvmet does it: ANA groups are target-wide IDs, each
// namespace is in one group, and each listener (nvmet's port) has a state per group. A controller reports
// the states of its admin queue's listener in the ANA log page (LID 0Ch); an I/O queue refuses I/O to a
// namespace whose group is inaccessible, lost or changing on its own listener (commands/io.cpp), so the
// host's native multipath fails over to another path.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>

#include "target/core/core_internal.h"

namespace rdmablk::target {

std::shared_ptr<AnaPort> TargetCore::ana_port_locked(const transport::TransportAddress& local) const {
  const int i = find_listener(listeners_, local);
  if (i >= 0 && static_cast<std::size_t>(i) < ana_ports_.size()) return ana_ports_[static_cast<std::size_t>(i)];
  return default_ana_port_;
}

unsigned TargetCore::apply_ana_config(AnaPort& port, const ListenerConfig& listener) noexcept {
  unsigned changed = 0;
  for (uint32_t g = 1; g <= kAnaGroupMax; ++g) changed += port.set(g, listener.ana_state(g)) ? 1 : 0;
  return changed;
}

void TargetCore::queue_ana_events_locked(const std::vector<const AnaPort*>& ports,
                                         const std::vector<const Subsystem*>& subsystems,
                                         EventReleases& notify) {
  for (auto& [id, ctrl] : controllers_) {
    if (ctrl->discovery || ctrl->dead) continue;
    const bool port_changed = std::find(ports.begin(), ports.end(), ctrl->ana_port.get()) != ports.end();
    const bool sub_changed = std::find(subsystems.begin(), subsystems.end(), ctrl->subsys.get()) != subsystems.end();
    if (!port_changed && !sub_changed) continue;
    queue_event_locked(*ctrl, protocol::kAnaChangeEvent, kAenMaskAna, protocol::kAecAnaChange);
    notify.push_back(release_of_locked(ctrl));
  }
}

// The groups a controller's log lists: group 1 (always there, as nvmet's default group), the groups of the
// subsystem's namespaces and the groups any listener names; ascending, each with its namespaces.
std::vector<uint8_t> TargetCore::ana_log_locked(const Controller& ctrl, bool groups_only) const {
  std::set<uint32_t> ids{kDefaultAnaGroup};
  for (const auto& l : listeners_)
    for (const auto& a : l.ana) ids.insert(a.group);
  std::map<uint32_t, std::vector<uint32_t>> members;
  for (const auto& ns : ctrl.subsys->table->namespaces) {  // sorted by NSID: each list is ascending
    const uint32_t g = ns->ana_group.load(std::memory_order_relaxed);
    ids.insert(g);
    members[g].push_back(ns->nsid);
  }
  const AnaPort& port = ctrl.ana_port ? *ctrl.ana_port : *default_ana_port_;
  std::vector<protocol::AnaGroupEntry> groups;
  for (uint32_t g : ids) {
    protocol::AnaGroupEntry e;
    e.anagrpid = g;
    e.state = port.get(g);
    e.chgcnt = ana_chgcnt_;  // one target-wide count, as nvmet's nvmet_ana_chgcnt
    if (auto it = members.find(g); it != members.end()) e.nsids = std::move(it->second);
    groups.push_back(std::move(e));
  }
  return protocol::make_ana_log(ana_chgcnt_, groups, groups_only);
}

namespace {

// "ADDR:PORT" / "[v6]:PORT" -> (address without brackets, port).
std::optional<std::pair<std::string, uint16_t>> split_endpoint(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  std::string_view addr = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 || port > 65535) return std::nullopt;
  return std::make_pair(std::string(addr), static_cast<uint16_t>(port));
}

}  // namespace

Result<bool> TargetCore::set_ana_state(std::string_view listener, uint32_t group, protocol::AnaState state) {
  if (group == 0 || group > kAnaGroupMax) {
    return make_error(fmt::format("ANA group {} is out of range (1..{})", group, kAnaGroupMax));
  }
  auto ep = split_endpoint(listener);
  if (!ep) return make_error(fmt::format("'{}' is not ADDR:PORT", listener));
  EventReleases notify;
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    std::vector<const AnaPort*> ports;
    bool found = false;
    for (std::size_t i = 0; i < listeners_.size() && i < ana_ports_.size(); ++i) {
      const auto& l = listeners_[i];
      if (l.role != ListenerRole::io || l.port != ep->second || l.address != ep->first) continue;
      found = true;
      if (ana_ports_[i]->set(group, state)) ports.push_back(ana_ports_[i].get());
    }
    if (!found) return make_error(fmt::format("no io listener at {}", listener));
    if (!ports.empty()) {
      changed = true;
      ++ana_chgcnt_;
      queue_ana_events_locked(ports, {}, notify);
    }
  }
  if (changed) {
    spdlog::info("ANA group {} on {} is now {}", group, listener, protocol::ana_state_name(state));
    for (auto& r : notify) post_deliver_events(r);
  }
  return changed;
}

uint64_t TargetCore::ana_change_count() const {
  std::lock_guard lock(mu_);
  return ana_chgcnt_;
}

}  // namespace rdmablk::target
