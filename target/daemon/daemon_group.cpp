#include "target/daemon/daemon_group.h"

#include <spdlog/spdlog.h>

#include "transport/address.h"
#include "transport/tcp/tcp_tls.h"

#include "backend/rados_cluster.h"
#include "target/core/core.h"

namespace rdmablk::target {

namespace {

std::set<uint32_t> groups_of(const TargetConfig& config) {
  std::set<uint32_t> out(config.group.ana_groups.begin(), config.group.ana_groups.end());
  for (const auto& sub : config.subsystems) {
    for (const auto& ns : sub.namespaces) out.insert(ns.ana_group);
  }
  return out;
}

// Each io listener's `ana`: every group in `all`, optimized when owned, else the standby state.
void set_listener_states(TargetConfig& config, const std::set<uint32_t>& all, const std::set<uint32_t>& owned) {
  const protocol::AnaState standby = config.group.standby_state;
  for (auto& l : config.listeners) {
    if (l.role != ListenerRole::io) continue;
    l.ana.clear();
    for (uint32_t g : all) {
      AnaGroupState s;
      s.group = g;
      s.state = owned.count(g) != 0 ? protocol::AnaState::optimized : standby;
      l.ana.push_back(s);
    }
  }
}

}  // namespace

void DaemonGroup::start_fenced(TargetConfig& config) {
  if (!config.group.enabled) return;
  set_listener_states(config, groups_of(config), {});
}

Result<std::shared_ptr<backend::RadosCluster>> group_cluster(const GroupConfig& g) {
  backend::RadosOptions ro;
  ro.ceph_conf = g.ceph_conf;
  ro.client = g.client;
  ro.keyring = g.keyring;
  auto cluster = backend::shared_rados_cluster(ro);
  if (!cluster) return make_error("group: " + cluster.error().message, cluster.error().errno_value);
  return cluster;
}

group::GroupPlace group_place(const GroupConfig& g) { return group::GroupPlace{g.pool, g.rados_namespace, g.name}; }

Result<std::unique_ptr<DaemonGroup>> DaemonGroup::start(const TargetConfig& config, TargetCore& core) {
  const GroupConfig& g = config.group;
  auto cluster = group_cluster(g);
  if (!cluster) return tl::unexpected(cluster.error());
  std::unique_ptr<DaemonGroup> d(new DaemonGroup(core));
  d->standby_ = g.standby_state;
  {
    std::lock_guard lock(d->mu_);
    d->applied_locked(config);
  }
  group::GroupMemberOptions o;
  o.place = group_place(g);
  o.member = g.member;
  o.home_groups = g.ana_groups;
  for (const auto& l : config.listeners) {
    if (l.role != ListenerRole::io) continue;
    o.listeners.push_back(group::MemberListener{transport::transport_name(l.transport), l.address, l.port,
                                                transport::tcp::to_string(l.tls)});
  }
  o.lease = std::chrono::seconds(g.lease_seconds);
  o.failback = g.failback == GroupFailback::automatic ? group::Failback::automatic : group::Failback::manual;
  o.blocklist = g.blocklist;
  DaemonGroup* self = d.get();
  auto member = group::GroupMember::start(*cluster, std::move(o),
                                          [self](const group::GroupOwnership& own) { self->owned_changed(own); });
  if (!member) return make_error("group: " + member.error().message, member.error().errno_value);
  d->member_ = std::move(*member);
  d->recheck_ = std::thread([raw = d.get()] { raw->recheck_loop(); });
  spdlog::info("gateway group {} ({}): member {}, home ANA groups {}, lease {} s", g.name,
               group_place(g).pool_and_namespace(), g.member, nlohmann::json(g.ana_groups).dump(), g.lease_seconds);
  return d;
}

DaemonGroup::~DaemonGroup() { stop(true); }

void DaemonGroup::stop(bool release) {
  {
    std::lock_guard lock(recheck_mu_);
    recheck_stopping_ = true;
  }
  recheck_wake_.notify_all();
  if (recheck_.joinable()) recheck_.join();
  if (member_) member_->stop(release);
}

void DaemonGroup::recheck_loop() {
  // Often enough that a reservation change whose notification never came holds everywhere within seconds;
  // one small read per shared namespace each time.
  constexpr std::chrono::seconds kRecheck{5};
  std::unique_lock lock(recheck_mu_);
  while (!recheck_wake_.wait_for(lock, kRecheck, [&] { return recheck_stopping_; })) {
    lock.unlock();
    core_.recheck_shared_reservations();
    lock.lock();
  }
}

void DaemonGroup::overlay_locked(TargetConfig& config) const {
  std::set<uint32_t> all = groups_of(config);
  all.insert(ownership_.managed.begin(), ownership_.managed.end());
  set_listener_states(config, all, ownership_.owned);
}

void DaemonGroup::applied_locked(const TargetConfig& config) {
  config_groups_ = groups_of(config);
  io_listeners_.clear();
  for (const auto& l : config.listeners) {
    if (l.role == ListenerRole::io) io_listeners_.push_back(host_port(l.address, l.port));
  }
}

// On the member's thread. The core sends the ANA Change notices for the states that moved.
void DaemonGroup::owned_changed(const group::GroupOwnership& o) {
  std::lock_guard lock(mu_);
  ownership_ = o;
  std::vector<PeerListener> peers;
  for (const auto& l : o.peer_listeners) {
    PeerListener p;
    if (auto t = transport::parse_transport_type(l.transport)) p.transport = *t;
    p.address = l.address;
    p.port = l.port;
    if (auto tls = transport::tcp::parse_tls_policy(l.tls)) p.tls = *tls;
    peers.push_back(std::move(p));
  }
  core_.set_peer_listeners(std::move(peers));
  std::set<uint32_t> all = config_groups_;
  all.insert(o.managed.begin(), o.managed.end());
  for (const auto& listener : io_listeners_) {
    for (uint32_t g : all) {
      const auto state = o.owned.count(g) != 0 ? protocol::AnaState::optimized : standby_;
      if (auto r = core_.set_ana_state(listener, g, state); !r) {
        spdlog::error("gateway group: ANA group {} on {}: {}", g, listener, r.error().message);
      }
    }
  }
}

nlohmann::json DaemonGroup::status_json() const {
  using nlohmann::json;
  const group::GroupMemberStatus s = member_->status();
  json members = json::array();
  for (const auto& m : s.members) {
    members.push_back(json{{"member", m.record.member},
                           {"ana_groups", m.record.ana_groups},
                           {"alive", m.alive},
                           {"lease_holder", m.lease_holder.empty() ? json(nullptr) : json(m.lease_holder)},
                           {"address", m.record.address},
                           {"started_unix_ms", m.record.started_unix_ms}});
  }
  json events = json::array();
  for (const auto& e : s.events) events.push_back(json{{"unix_ms", e.unix_ms}, {"what", e.what}});
  return json{{"group", s.group},
              {"member", s.member},
              {"where", s.where},
              {"lease_seconds", s.lease.count()},
              {"failback", group::failback_name(s.failback)},
              {"owned", s.ownership.owned},
              {"managed", s.ownership.managed},
              {"members", members},
              {"last_error", s.last_error.empty() ? json(nullptr) : json(s.last_error)},
              {"events", events}};
}

}  // namespace rdmablk::target
