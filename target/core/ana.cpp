// Asymmetric Namespace Access (NVMe Base 2.0, 8.20), as nvmet does it: ANA groups are target-wide IDs, each
// namespace is in one group, and each listener (nvmet's port) has a state per group. A controller reports
// the states of its admin queue's listener in the ANA log page (LID 0Ch); an I/O queue refuses I/O to a
// namespace whose group is inaccessible, lost or changing on its own listener (commands/io.cpp), so the
// host's native multipath fails over to another path.
//
// The ports, the change count and the log page are the AnaRegistry's (ana_registry.h); here is the core's
// side: the control socket's set_ana_state and the ANA Change events to the controllers.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <optional>

#include "target/core/core_internal.h"

namespace rdmablk::target {

void TargetCore::queue_ana_events_locked(const std::vector<const AnaPort*>& ports,
                                         const std::vector<const Subsystem*>& subsystems,
                                         EventReleases& notify) {
  for (auto& [id, ctrl] : controllers_) {
    if (ctrl->discovery || ctrl->dead) continue;
    const bool port_changed = std::find(ports.begin(), ports.end(), ctrl->ana_port.get()) != ports.end();
    const bool sub_changed = std::find(subsystems.begin(), subsystems.end(), ctrl->subsys.get()) != subsystems.end();
    if (!port_changed && !sub_changed) continue;
    ControllerRegistry::queue_event(*ctrl, protocol::kAnaChangeEvent, kAenMaskAna, protocol::kAecAnaChange);
    notify.push_back(ControllerRegistry::release_of(ctrl));
  }
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
    auto ports = ana_.set_state(ep->first, ep->second, group, state);  // counts the change
    if (!ports) return make_error(fmt::format("no io listener at {}", listener));
    if (!ports->empty()) {
      changed = true;
      queue_ana_events_locked(*ports, {}, notify);
    }
  }
  if (changed) {
    spdlog::info("ANA group {} on {} is now {}", group, listener, protocol::ana_state_name(state));
    for (auto& r : notify) post_deliver_events(r);
  }
  return changed;
}

uint64_t TargetCore::ana_change_count() const { return ana_.change_count(); }

}  // namespace rdmablk::target
