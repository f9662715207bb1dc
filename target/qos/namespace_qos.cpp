#include "target/qos/namespace_qos.h"

#include <algorithm>

namespace rdmablk::target::qos {

namespace {

// The tokens a command costs against one kind; 0 when the kind does not apply to it.
uint64_t cost_of(Kind k, Cost c) noexcept {
  switch (k) {
    case Kind::iops: return 1;
    case Kind::bytes: return c.bytes;
    case Kind::read_bytes: return c.write ? 0 : c.bytes;
    case Kind::write_bytes: return c.write ? c.bytes : 0;
  }
  return 0;
}

// Makes sure every limited kind of the allowances holds the command's cost, topping them up as needed.
bool ready(Budget& b, Allowances& a, Cost c, uint64_t now_ns) noexcept {
  for (unsigned i = 0; i < kKinds; ++i) {
    SharedBucket& bucket = b.buckets[i];
    if (bucket.rate() == 0) continue;
    const uint64_t cost = cost_of(static_cast<Kind>(i), c);
    if (cost == 0 || a.kinds[i].has(cost)) continue;
    if (!a.kinds[i].top_up(bucket, static_cast<int64_t>(cost) * kMicro, now_ns)) return false;
  }
  return true;
}

void commit(const Budget& b, Allowances& a, Cost c) noexcept {
  for (unsigned i = 0; i < kKinds; ++i) {
    if (b.buckets[i].rate() == 0) continue;
    a.kinds[i].tokens -= static_cast<int64_t>(cost_of(static_cast<Kind>(i), c)) * kMicro;
  }
}

}  // namespace

void Budget::set(const QosLimits& l) noexcept {
  buckets[0].set_rate(l.iops);
  buckets[1].set_rate(l.mbps * kBytesPerMb);
  buckets[2].set_rate(l.read_mbps * kBytesPerMb);
  buckets[3].set_rate(l.write_mbps * kBytesPerMb);
}

NamespaceQos::NamespaceQos(const NamespaceQosConfig& config) : hosts_(config.hosts.size()) {
  for (std::size_t i = 0; i < hosts_.size(); ++i) hosts_[i].nqn = config.hosts[i].host;
  set(config);
}

bool NamespaceQos::same_hosts(const NamespaceQosConfig& config) const noexcept {
  return std::equal(hosts_.begin(), hosts_.end(), config.hosts.begin(), config.hosts.end(),
                    [](const Host& h, const HostQosConfig& c) { return h.nqn == c.host; });
}

void NamespaceQos::set(const NamespaceQosConfig& config) noexcept {
  budget_.set(config.limits);
  for (std::size_t i = 0; i < hosts_.size() && i < config.hosts.size(); ++i)
    hosts_[i].budget.set(config.hosts[i].limits);
  active_.store(config.any(), std::memory_order_relaxed);
}

int NamespaceQos::host_index(std::string_view hostnqn) const noexcept {
  for (std::size_t i = 0; i < hosts_.size(); ++i)
    if (hosts_[i].nqn == hostnqn) return static_cast<int>(i);
  return -1;
}

bool admit(NamespaceQos& qos, ReactorQos& local, int host, Cost cost, uint64_t now_ns) noexcept {
  if (host >= 0 && local.hosts.size() <= static_cast<std::size_t>(host)) return false;  // (sized by the core)
  Allowances* const h = host >= 0 ? &local.hosts[static_cast<std::size_t>(host)] : nullptr;
  if (h != nullptr && !ready(qos.host_budget(static_cast<std::size_t>(host)), *h, cost, now_ns)) return false;
  if (!ready(qos.budget(), local.ns, cost, now_ns)) return false;
  if (h != nullptr) commit(qos.host_budget(static_cast<std::size_t>(host)), *h, cost);
  commit(qos.budget(), local.ns, cost);
  return true;
}

}  // namespace rdmablk::target::qos
