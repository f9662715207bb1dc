// A namespace's `qos:` (docs/configuration.md#qos): the namespace's limits and, under `hosts:`, one host's
// own limits on it. Checked against the subsystem's hosts by check_namespace_qos.
#include <algorithm>

#include "target/config/parser.h"

namespace rdmablk::target::config_impl {

namespace {
// Above these a limit is a typo, not a limit (10 million commands/s, 1 TB/s).
constexpr uint64_t kMaxIops = 10'000'000;
constexpr uint64_t kMaxMbps = 1'000'000;
}  // namespace

// The four limit keys of a `qos:` mapping or of one of its host entries.
QosLimits Parser::parse_qos_limits(const Mapping& m) const {
  QosLimits l;
  if (const Field* f = m.find("iops")) l.iops = integer(*f, 0, kMaxIops);
  if (const Field* f = m.find("mbps")) l.mbps = integer(*f, 0, kMaxMbps);
  if (const Field* f = m.find("read_mbps")) l.read_mbps = integer(*f, 0, kMaxMbps);
  if (const Field* f = m.find("write_mbps")) l.write_mbps = integer(*f, 0, kMaxMbps);
  return l;
}

void Parser::parse_namespace_qos(const Field& f, NamespaceConfig& ns) const {
  expect_mapping(f, "iops, mbps, read_mbps, write_mbps, hosts", "qos: {iops: 5000}");
  Mapping m(*this, f.value, f.path, f.value_at, {"iops", "mbps", "read_mbps", "write_mbps", "hosts"});
  NamespaceQosConfig& qos = ns.qos;
  qos.at = f.value_at;
  qos.limits = parse_qos_limits(m);
  const Field* hosts = m.find("hosts");
  if (hosts == nullptr) return;
  auto items = sequence(*hosts);
  if (items.empty()) fail(hosts->value_at, hosts->path, "an empty list (leave hosts out for no per-host limits)");
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string item_path = hosts->path + "[" + std::to_string(i) + "]";
    const SourceLocation item_at = missing(items[i]) ? hosts->value_at : location_of(items[i].Mark());
    Field item{item_path, "", items[i], item_at, item_at};
    expect_mapping(item, "host, iops, mbps, read_mbps, write_mbps", "- {host: NQN, iops: 1000}");
    Mapping hm(*this, items[i], item_path, item_at, {"host", "iops", "mbps", "read_mbps", "write_mbps"});
    HostQosConfig h;
    h.at = item_at;
    const Field& host = hm.require("host", "the host NQN the limits are for");
    h.host = string_value(host, "a host NQN");
    check_nqn(host.value_at, host.path, h.host);
    const bool twice = std::any_of(qos.hosts.begin(), qos.hosts.end(), [&](const auto& o) { return o.host == h.host; });
    if (twice) fail(host.value_at, host.path, "duplicate host NQN");
    h.limits = parse_qos_limits(hm);
    if (!h.limits.any()) fail(item_at, item_path, "no limit (give iops, mbps, read_mbps or write_mbps)");
    qos.hosts.push_back(std::move(h));
  }
}

// A per-host limit must name a host that can connect to the subsystem and that sees the namespace.
void Parser::check_namespace_qos(const SubsystemConfig& sub, const NamespaceConfig& ns, const std::string& path) const {
  for (std::size_t i = 0; i < ns.qos.hosts.size(); ++i) {
    const HostQosConfig& h = ns.qos.hosts[i];
    const std::string at = path + ".hosts[" + std::to_string(i) + "].host";
    if (!sub.allow_any_host && std::find(sub.hosts.begin(), sub.hosts.end(), h.host) == sub.hosts.end())
      fail(h.at, at, in_quotes(h.host) + " is not among the subsystem's hosts, so its limit could never apply");
    if (!ns.visible_to(h.host))
      fail(h.at, at, in_quotes(h.host) + " does not see this namespace (its hosts:), so its limit could never apply");
  }
}

}  // namespace rdmablk::target::config_impl
