#include "target/config/parser.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>

namespace rdmablk::target::config_impl {

std::optional<IpAddress> parse_ip(const std::string& text) {
  IpAddress ip;
  if (inet_pton(AF_INET, text.c_str(), ip.bytes.data()) == 1) {
    ip.family = AF_INET;
    return ip;
  }
  if (inet_pton(AF_INET6, text.c_str(), ip.bytes.data()) == 1) {
    ip.family = AF_INET6;
    return ip;
  }
  return std::nullopt;
}

std::string endpoint(const ListenerConfig& l) {
  return std::string(transport::transport_name(l.transport)) + " " + host_port(l.address, l.port);
}

// Two TCP sockets that could not both bind: the same port, and the same address or a wildcard that
// covers the other (Linux's default bindv6only=0 makes "::" cover IPv4 too).
bool sockets_overlap(const std::string& a, uint16_t a_port, const std::string& b, uint16_t b_port) {
  if (a_port != b_port) return false;
  auto ia = parse_ip(a);
  auto ib = parse_ip(b);
  if (!ia || !ib) return a == b;
  if (ia->family == ib->family) return ia->bytes == ib->bytes || ia->wildcard() || ib->wildcard();
  return (ia->family == AF_INET6 && ia->wildcard()) || (ib->family == AF_INET6 && ib->wildcard());
}

namespace {

// Two listeners that could not both bind: same transport, and sockets that overlap.
bool listeners_overlap(const ListenerConfig& a, const ListenerConfig& b) {
  return a.transport == b.transport && sockets_overlap(a.address, a.port, b.address, b.port);
}

}  // namespace

ListenerConfig Parser::parse_listener(const YAML::Node& node, const std::string& path) {
  SourceLocation at = location_of(node.Mark());
  if (!node.IsMap())
    fail(at, path,
         std::string("expected a mapping (transport, address, port, role, tls, c2h_success, ana), got a ") +
             node_kind(node));
  Mapping m(*this, node, path, at, {"transport", "address", "port", "role", "tls", "c2h_success", "ana"});
  ListenerConfig l;
  l.at = at;
  if (const Field* f = m.find("transport")) {
    auto type = transport::parse_transport_type(scalar(*f, "tcp or rdma"));
    if (!type) fail(f->value_at, f->path, type.error().message);
    l.transport = *type;
  }
  if (const Field* f = m.find("role")) {
    l.role = one_of<ListenerRole>(*f, "role", {{"io", ListenerRole::io}, {"discovery", ListenerRole::discovery}});
  }
  const Field& address = m.require("address", "an IPv4 or IPv6 address, 0.0.0.0 or :: for all");
  l.address = ip_address(address, "an IPv4 or IPv6 address");
  l.address_at = address.value_at;
  l.port = l.role == ListenerRole::discovery ? transport::kDefaultDiscoveryPort : transport::kDefaultIoPort;
  l.port_at = at;
  if (const Field* f = m.find("port")) {
    l.port = static_cast<uint16_t>(integer(*f, 1, 65535));
    l.port_at = f->value_at;
  }
  if (const Field* f = m.find("tls")) {
    auto policy = transport::tcp::parse_tls_policy(scalar(*f, "none, optional or required"));
    if (!policy) fail(f->value_at, f->path, policy.error().message);
    if (*policy != transport::tcp::TlsPolicy::none && l.transport != transport::TransportType::tcp) {
      fail(f->value_at, f->path, "TLS is for NVMe/TCP listeners only (the RDMA binding has no secure channel)");
    }
    l.tls = *policy;
  }
  if (const Field* f = m.find("c2h_success")) {
    using transport::tcp::C2hSuccess;
    l.c2h_success = one_of<C2hSuccess>(
        *f, "c2h_success",
        {{"auto", C2hSuccess::sq_flow_disabled}, {"always", C2hSuccess::always}, {"off", C2hSuccess::off}});
    if (l.transport != transport::TransportType::tcp) {
      fail(f->key_at, f->path, "c2h_success is for NVMe/TCP listeners only (RDMA sends no C2HData PDUs)");
    }
  }
  if (const Field* f = m.find("ana")) {
    if (l.role == ListenerRole::discovery) {
      fail(f->key_at, f->path, "ANA states apply to io listeners only (a discovery listener serves no namespaces)");
    }
    l.ana = parse_ana(*f);
  }
  return l;
}

// `ana: {1: optimized, 2: inaccessible}`: group -> state, each group once.
std::vector<AnaGroupState> Parser::parse_ana(const Field& f) const {
  if (missing(f.value)) return {};
  if (!f.value.IsMap()) {
    fail(f.value_at, f.path,
         std::string("expected a mapping of ANA group to state ({1: optimized, 2: inaccessible}), got a ") +
             node_kind(f.value));
  }
  std::vector<AnaGroupState> out;
  for (auto it = f.value.begin(); it != f.value.end(); ++it) {
    const SourceLocation key_at = location_of(it->first.Mark());
    const std::string key_text = it->first.IsScalar() ? it->first.Scalar() : std::string();
    Field key{f.path, "", it->first, key_at, key_at};
    AnaGroupState entry;
    entry.group = integer32(key, 1, kAnaGroupMax);  // group 0 is not an ANA group ID
    entry.at = key_at;
    const std::string item_path = f.path + "." + std::to_string(entry.group);
    for (const auto& seen : out) {
      if (seen.group == entry.group) {
        fail(key_at, item_path, "ANA group listed twice (first at line " + std::to_string(seen.at.line) + ")");
      }
    }
    const SourceLocation value_at = missing(it->second) ? key_at : location_of(it->second.Mark());
    Field value{item_path, key_text, it->second, key_at, value_at};
    const std::string name = scalar(value, "an ANA state");
    auto state = parse_ana_state(name);
    if (!state) fail(value_at, item_path, state.error().message);
    entry.state = *state;
    out.push_back(entry);
  }
  std::sort(out.begin(), out.end(), [](const AnaGroupState& a, const AnaGroupState& b) { return a.group < b.group; });
  return out;
}

std::string Parser::ip_address(const Field& f, std::string_view what) const {
  std::string address = string_value(f, what);
  if (address.size() > 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  if (!parse_ip(address)) {
    fail(f.value_at, f.path,
         in_quotes(address) +
             " is not an IPv4 or IPv6 address (host names are not resolved here; "
             "0.0.0.0 or \"::\" listens on every address)");
  }
  return address;
}

void Parser::check_listeners(const TargetConfig& config, const Field& f) const {
  const auto& ls = config.listeners;
  for (std::size_t j = 0; j < ls.size(); ++j) {
    for (std::size_t i = 0; i < j; ++i) {
      if (!listeners_overlap(ls[i], ls[j])) continue;
      std::string path = f.path + "[" + std::to_string(j) + "]";
      if (ls[i].address == ls[j].address) {
        fail(ls[j].at, path,
             "duplicate listener " + endpoint(ls[j]) + " (first at line " + std::to_string(ls[i].at.line) + ")");
      }
      fail(ls[j].at, path,
           endpoint(ls[j]) + " overlaps " + endpoint(ls[i]) + " at line " + std::to_string(ls[i].at.line) +
               " (a wildcard address already covers the other)");
    }
  }
  bool any_io = std::any_of(ls.begin(), ls.end(), [](const ListenerConfig& l) { return l.role == ListenerRole::io; });
  if (!any_io && !config.subsystems.empty()) {
    fail(f.value_at, f.path, "no listener has role io: the subsystems would be unreachable");
  }
}

}  // namespace rdmablk::target::config_impl
