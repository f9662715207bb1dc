// The discovery log page (LID 0x70, NVMe-oF 1.1 5.3) of the discovery controller.
//
// Entries, like nvmet: first the "current discovery subsystem" (SUBTYPE 3) for the address the host came
// in on, then one NVMe subsystem entry (SUBTYPE 2) per (I/O listener x subsystem this host may connect to).
// A listener bound to a wildcard address is reported with the local address of the host's connection, never
// as 0.0.0.0 / ::. Subsystems the host is not allowed on are not listed at all.
#include <algorithm>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

#include "protocol/log_pages.h"
#include "target/core/core_internal.h"

namespace rdmablk::target {

namespace {

using protocol::DiscoveryLogEntry;

bool is_wildcard(std::string_view a) noexcept {
  return a.empty() || a == "0.0.0.0" || a == "::" || a == "[::]" || a == "*";
}

// "::ffff:10.0.0.1" (an IPv4 peer on a dual-stack socket) -> "10.0.0.1"; brackets dropped.
std::string plain_address(std::string_view a) {
  if (a.size() > 2 && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
  constexpr std::string_view mapped = "::ffff:";
  if (a.size() > mapped.size() && a.substr(0, mapped.size()) == mapped &&
      a.substr(mapped.size()).find(':') == std::string_view::npos)
    a.remove_prefix(mapped.size());
  return std::string(a);
}

DiscoveryLogEntry make_entry(transport::TransportType type, const std::string& traddr, uint16_t port, uint16_t portid,
                             protocol::SubsystemType subtype, std::string_view nqn, uint16_t asqsz,
                             transport::tcp::TlsPolicy tls) {
  DiscoveryLogEntry e{};
  e.trtype = static_cast<uint8_t>(type);
  e.adrfam = static_cast<uint8_t>(traddr.find(':') != std::string::npos ? protocol::AddressFamily::ipv6
                                                                         : protocol::AddressFamily::ipv4);
  e.subtype = static_cast<uint8_t>(subtype);
  e.treq = protocol::treq::kSecureNotSpecified;  // no TLS: SECTYPE 0, TREQ 1:0 = 0
  e.portid.set(portid);
  e.cntlid.set(protocol::kCntlidDynamic);
  e.asqsz.set(asqsz);
  if (subtype == protocol::SubsystemType::current_discovery)
    e.eflags.set(protocol::eflags::kDuplicateReturnedInfo | protocol::eflags::kExplicitPersistentConnection);
  const std::string svc = std::to_string(port);
  protocol::set_padded(e.trsvcid, svc.data(), svc.size(), '\0');
  protocol::set_padded(e.subnqn, nqn.data(), std::min<std::size_t>(nqn.size(), e.subnqn.size() - 1), '\0');
  protocol::set_padded(e.traddr, traddr.data(), std::min<std::size_t>(traddr.size(), e.traddr.size() - 1), '\0');
  if (type == transport::TransportType::rdma) {
    protocol::RdmaTsas t{};
    t.qptype = static_cast<uint8_t>(protocol::RdmaQpType::reliable_connected);
    t.prtype = static_cast<uint8_t>(protocol::RdmaProviderType::not_specified);
    t.cms = static_cast<uint8_t>(protocol::RdmaCms::rdma_cm);
    e.set_tsas(t);
  } else {
    // TREQ 1:0 and TSAS SECTYPE from the listener's TLS policy (none: not specified, no security).
    protocol::set_tcp_secure_channel(e, transport::tcp::secure_channel_of(tls));
  }
  return e;
}

// Port IDs of other members' listeners start here (this target's are 1..listeners).
constexpr std::size_t kPeerPortIdBase = 0x4000;

}  // namespace

void TargetCore::discovery_changed_locked(EventReleases& notify) {
  ++discovery_genctr_;
  const uint32_t event = protocol::async_event_result(
      protocol::AsyncEventType::notice, static_cast<uint8_t>(protocol::AsyncEventNotice::discovery_log_page_change),
      static_cast<uint8_t>(protocol::LogPageId::discovery));
  for (auto& [id, ctrl] : controllers_) {
    if (!ctrl->discovery) continue;
    ControllerRegistry::queue_event(*ctrl, event, kAenMaskDiscovery, protocol::kAecDiscoveryLogChange);
    notify.push_back(ControllerRegistry::release_of(ctrl));
  }
}

bool TargetCore::set_peer_listeners(std::vector<PeerListener> peers) {
  EventReleases notify;
  {
    std::lock_guard lock(mu_);
    if (peers == peer_listeners_) return false;
    peer_listeners_ = std::move(peers);
    discovery_changed_locked(notify);
  }
  spdlog::info("discovery: the other gateway group members' listeners changed");
  for (auto& r : notify) post_deliver_events(r);
  return true;
}

int find_listener(std::span<const ListenerConfig> listeners, const transport::TransportAddress& local) noexcept {
  const std::string conn_addr = plain_address(local.traddr);
  int wildcard = -1;
  for (std::size_t i = 0; i < listeners.size(); ++i) {
    const auto& l = listeners[i];
    if (l.transport != local.type || l.port != local.trsvcid) continue;
    if (is_wildcard(l.address)) {
      if (wildcard < 0) wildcard = static_cast<int>(i);
    } else if (plain_address(l.address) == conn_addr) {
      return static_cast<int>(i);  // a listener on this very address wins over a wildcard one
    }
  }
  return wildcard;
}

std::vector<uint8_t> TargetCore::discovery_log_locked(const Controller& ctrl) const {
  std::vector<DiscoveryLogEntry> entries;
  const auto asqsz = static_cast<uint16_t>(limits_.admin_queue_depth);
  const std::string conn_addr = plain_address(ctrl.local_address.traddr);

  // The discovery subsystem the host is talking to.
  const int current = find_listener(listeners_, ctrl.local_address);
  const auto current_portid = static_cast<uint16_t>(current + 1);  // 0 when no listener matches
  if (!is_wildcard(conn_addr))
    entries.push_back(make_entry(ctrl.local_address.type, conn_addr, ctrl.local_address.trsvcid, current_portid,
                                 protocol::SubsystemType::current_discovery, protocol::kDiscoveryNqn, asqsz,
                                 current >= 0 ? listeners_[current].tls : transport::tcp::TlsPolicy::none));

  for (std::size_t i = 0; i < listeners_.size(); ++i) {
    const auto& l = listeners_[i];
    if (l.role != ListenerRole::io) continue;
    const std::string traddr = is_wildcard(l.address) ? conn_addr : plain_address(l.address);
    if (is_wildcard(traddr)) continue;  // never advertise a wildcard
    for (const auto& [nqn, sub] : subsystems_) {
      if (sub->removed || !sub->host_allowed(ctrl.hostnqn)) continue;
      entries.push_back(make_entry(l.transport, traddr, l.port, static_cast<uint16_t>(i + 1),
                                   protocol::SubsystemType::nvme, nqn, asqsz, l.tls));
    }
  }

  // The other gateway group members' io listeners (their own ports: port IDs above this target's).
  for (std::size_t i = 0; i < peer_listeners_.size(); ++i) {
    const PeerListener& p = peer_listeners_[i];
    if (is_wildcard(p.address)) continue;
    for (const auto& [nqn, sub] : subsystems_) {
      if (sub->removed || !sub->host_allowed(ctrl.hostnqn)) continue;
      entries.push_back(make_entry(p.transport, plain_address(p.address), p.port, static_cast<uint16_t>(kPeerPortIdBase + i),
                                   protocol::SubsystemType::nvme, nqn, asqsz, p.tls));
    }
  }

  protocol::DiscoveryLogHeader hdr{};
  hdr.genctr.set(discovery_genctr_);
  hdr.numrec.set(entries.size());
  hdr.recfmt.set(0);
  std::vector<uint8_t> page(sizeof(hdr) + entries.size() * sizeof(DiscoveryLogEntry));
  std::memcpy(page.data(), &hdr, sizeof(hdr));
  if (!entries.empty()) std::memcpy(page.data() + sizeof(hdr), entries.data(), entries.size() * sizeof(DiscoveryLogEntry));
  return page;
}

}  // namespace rdmablk::target
