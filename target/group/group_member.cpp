#include "target/group/group_member.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace rdmablk::target::group {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxEvents = 32;

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string groups_text(const std::vector<uint32_t>& groups) {
  return groups.empty() ? "none" : fmt::format("{}", fmt::join(groups, ", "));
}

}  // namespace

const char* failback_name(Failback f) noexcept { return f == Failback::automatic ? "automatic" : "manual"; }

GroupMember::GroupMember(std::shared_ptr<backend::RadosCluster> cluster, std::unique_ptr<MemberRegistry> registry,
                         GroupMemberOptions options, OwnershipChanged changed)
    : cluster_(std::move(cluster)),
      registry_(std::move(registry)),
      options_(std::move(options)),
      changed_(std::move(changed)) {
  std::sort(options_.home_groups.begin(), options_.home_groups.end());
  record_.member = options_.member;
  record_.ana_groups = options_.home_groups;
  record_.listeners = options_.listeners;
  record_.started_unix_ms = unix_ms_now();
  known_groups_.insert(options_.home_groups.begin(), options_.home_groups.end());
}

Result<std::unique_ptr<GroupMember>> GroupMember::start(std::shared_ptr<backend::RadosCluster> cluster,
                                                        GroupMemberOptions options, OwnershipChanged changed) {
  if (options.member.empty()) return make_error("gateway group: the member name is required", EINVAL);
  if (options.lease.count() < 2) return make_error("gateway group: the lease must be at least 2 s", EINVAL);
  auto registry = MemberRegistry::open(cluster, options.place);
  if (!registry) return tl::unexpected(registry.error());
  std::unique_ptr<GroupMember> m(
      new GroupMember(std::move(cluster), std::move(*registry), std::move(options), std::move(changed)));
  {
    std::lock_guard lock(m->mu_);
    m->published_.managed = m->known_groups_;
    m->changed_(m->published_);  // nothing owned until the lease is ours
  }
  GroupMember* self = m.get();
  m->ticker_ = std::thread([self] { self->run(); });
  m->fencer_ = std::thread([self] { self->run_fences(); });
  return m;
}

GroupMember::~GroupMember() { stop(true); }

void GroupMember::stop(bool release) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !ticker_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  if (fencer_.joinable()) fencer_.join();
  if (!release) return;
  std::map<std::string, Held> held;
  {
    std::lock_guard lock(mu_);
    held.swap(held_);
    publish_locked();  // stop serving before the leases are free for the survivors
  }
  // Said before the locks go: a survivor that takes them over must not fence a member that stops cleanly.
  if (alive_) {
    MemberRecord stopping = record_;
    stopping.stopped_cleanly = true;
    if (auto p = registry_->publish(stopping); !p) spdlog::warn("gateway group: {}", p.error().message);
  }
  for (auto& [member, h] : held) {
    if (auto r = h.lease->release(); !r) spdlog::warn("gateway group: {}", r.error().message);
  }
  if (alive_) {
    if (auto r = alive_->release(); !r) spdlog::warn("gateway group: {}", r.error().message);
    alive_.reset();
  }
}

LeaseOptions GroupMember::lease_options(const std::string& member, const char* lock) const {
  LeaseOptions o;
  o.place = options_.place;
  o.member = member;
  o.duration = options_.lease;
  o.lock = lock;
  return o;
}

std::chrono::milliseconds GroupMember::fence_margin() const {
  return std::max<std::chrono::milliseconds>(std::chrono::milliseconds(200), options_.lease / 10);
}

void GroupMember::run() {
  const auto period = std::chrono::duration_cast<std::chrono::milliseconds>(options_.lease) / 3;
  for (;;) {
    tick();
    std::unique_lock lock(mu_);
    if (wake_.wait_for(lock, period, [&] { return stopping_; })) return;
  }
}

void GroupMember::run_fences() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    auto next = Clock::time_point::max();
    const auto now = Clock::now();
    bool fenced_any = false;
    for (auto& [member, h] : held_) {
      if (h.fenced) continue;
      if (h.valid_until <= now) {
        h.fenced = true;
        fenced_any = true;
        event_locked(fmt::format("the lease of {} was not renewed in time: stopped serving groups {}", member,
                                 groups_text(h.groups)));
      } else {
        next = std::min(next, h.valid_until);
      }
    }
    if (fenced_any) publish_locked();
    if (next == Clock::time_point::max()) {
      wake_.wait(lock);
    } else {
      wake_.wait_until(lock, next);
    }
  }
}

void GroupMember::tick() {
  keep_alive();
  keep_own_lease();
  renew_held();
  auto records = registry_->list();
  if (!records) {
    std::lock_guard lock(mu_);
    last_error_ = records.error().message;
    return;
  }
  watch_others(*records);
}

void GroupMember::keep_alive() {
  if (alive_) {
    if (auto r = alive_->renew(); r) return;
    else if (r.error().errno_value != ENOENT) {
      std::lock_guard lock(mu_);
      last_error_ = r.error().message;
      return;
    }
    alive_.reset();  // lapsed: take it again below
  }
  auto a = MemberLease::acquire(cluster_, lease_options(options_.member, kAliveLock));
  if (!a) {
    std::lock_guard lock(mu_);
    if (last_error_ != a.error().message)
      spdlog::error("gateway group {}: member {}: {}", options_.place.group, options_.member, a.error().message);
    last_error_ = a.error().message;
    return;
  }
  alive_ = std::move(*a);
  // Published only once the member is known to be this process: a second process started with the same
  // member name must not overwrite the address a survivor would blocklist.
  record_.address = registry_->client_address();
  if (auto p = registry_->publish(record_); !p) {
    std::lock_guard lock(mu_);
    last_error_ = p.error().message;
  }
}

void GroupMember::keep_own_lease() {
  {
    std::lock_guard lock(mu_);
    if (!alive_ || held_.count(options_.member) != 0) return;
  }
  const auto t0 = Clock::now();
  auto l = MemberLease::acquire(cluster_, lease_options(options_.member, kLeaseLock));
  std::lock_guard lock(mu_);
  if (!l) {
    if (waiting_for_ != l.error().message) {
      event_locked(fmt::format("waiting for its own lease: {}", l.error().message));
      waiting_for_ = l.error().message;
    }
    return;
  }
  waiting_for_.clear();
  held_[options_.member] = Held{std::move(*l), options_.home_groups, t0 + options_.lease - fence_margin(), false};
  event_locked(options_.home_groups.empty()
                   ? std::string("holds its own lease (a standby: no home groups)")
                   : fmt::format("serving its own groups {}", groups_text(options_.home_groups)));
  publish_locked();
  wake_.notify_all();
}

void GroupMember::renew_held() {
  std::vector<std::pair<std::string, std::shared_ptr<MemberLease>>> leases;
  {
    std::lock_guard lock(mu_);
    for (auto& [member, h] : held_) leases.emplace_back(member, h.lease);
  }
  for (auto& [member, lease] : leases) {
    const auto t0 = Clock::now();
    auto r = lease->renew();
    std::lock_guard lock(mu_);
    auto it = held_.find(member);
    if (it == held_.end() || it->second.lease != lease) continue;
    Held& h = it->second;
    if (r) {
      h.valid_until = t0 + options_.lease - fence_margin();
      if (h.fenced) {
        h.fenced = false;
        event_locked(
            fmt::format("renewed the lease of {} after all: serving groups {} again", member, groups_text(h.groups)));
        publish_locked();
      }
      continue;
    }
    last_error_ = r.error().message;
    if (r.error().errno_value == ESHUTDOWN && !blocklisted_) {
      blocklisted_ = true;  // every operation of this Ceph client fails from now on
      event_locked("its Ceph client is blocklisted (a survivor fenced it): restart the target to rejoin the group");
      spdlog::error("gateway group {}: member {}: its Ceph client is blocklisted; restart the target to rejoin",
                    options_.place.group, options_.member);
    }
    if (r.error().errno_value != ENOENT) continue;  // a timeout: the fence thread stops serving in time
    event_locked(fmt::format("lost the lease of {}: stopped serving groups {}", member, groups_text(h.groups)));
    held_.erase(it);
    publish_locked();
  }
}

void GroupMember::watch_others(const std::vector<MemberRecord>& records) {
  std::vector<GroupMemberStatus::Member> seen;
  for (const MemberRecord& r : records) {
    GroupMemberStatus::Member m{r, false, ""};
    auto alive = registry_->holder(r.member, kAliveLock);
    auto lease = registry_->holder(r.member, kLeaseLock);
    if (!alive || !lease) {
      std::lock_guard lock(mu_);
      last_error_ = (!alive ? alive : lease).error().message;
      return;
    }
    m.alive = alive->held;
    m.lease_holder = lease->held ? lease->holder : "";
    seen.push_back(m);
    if (r.member == options_.member) continue;
    bool mine = false;
    {
      std::lock_guard lock(mu_);
      mine = held_.count(r.member) != 0;
    }
    if (mine && m.alive && options_.failback == Failback::automatic) {
      hand_back(r.member);
    } else if (!mine && !m.alive && !lease->held) {
      take_over(r);
    }
  }
  std::lock_guard lock(mu_);
  members_ = std::move(seen);
  last_error_.clear();
  for (const auto& m : members_) known_groups_.insert(m.record.ana_groups.begin(), m.record.ana_groups.end());
  publish_locked();
}

void GroupMember::take_over(const MemberRecord& r) {
  const auto t0 = Clock::now();
  auto l = MemberLease::take_over(cluster_, lease_options(r.member, kLeaseLock), options_.member);
  if (!l) return;  // another survivor was first, or the member came back
  // Fencing: the member fenced itself by its own clock before its lease lapsed; the blocklist makes sure
  // that nothing it still had in flight reaches the OSDs after this point.
  // The record as it is now, after the takeover: a member that stopped cleanly said so before it let go.
  auto now = registry_->find(r.member);
  const MemberRecord current = now && *now ? **now : r;
  std::string fenced =
      current.stopped_cleanly ? "it stopped cleanly: nothing to fence" : "not blocklisted (no address recorded)";
  if (options_.blocklist && !current.stopped_cleanly && !current.address.empty()) {
    auto b = registry_->blocklist(current.address, options_.blocklist_seconds);
    fenced = b ? "blocklisted " + current.address : "blocklisting failed: " + b.error().message;
    if (!b) spdlog::error("gateway group {}: {}", options_.place.group, b.error().message);
  }
  std::lock_guard lock(mu_);
  held_[r.member] = Held{std::move(*l), r.ana_groups, t0 + options_.lease - fence_margin(), false};
  event_locked(fmt::format("took over the lease of {} (not alive; {}): serving groups {}", r.member, fenced,
                           groups_text(r.ana_groups)));
  publish_locked();
  wake_.notify_all();
}

void GroupMember::hand_back(const std::string& member) {
  std::shared_ptr<MemberLease> lease;
  {
    std::lock_guard lock(mu_);
    auto it = held_.find(member);
    if (it == held_.end()) return;
    lease = it->second.lease;
    event_locked(fmt::format("handing back groups {} to {}, alive again", groups_text(it->second.groups), member));
    held_.erase(it);
    publish_locked();  // not served here any more before the member may take them
  }
  if (auto r = lease->release(); !r) spdlog::warn("gateway group {}: {}", options_.place.group, r.error().message);
}

void GroupMember::publish_locked() {
  GroupOwnership next;
  next.managed = known_groups_;
  for (const auto& [member, h] : held_) {
    if (!h.fenced) next.owned.insert(h.groups.begin(), h.groups.end());
  }
  for (const auto& m : members_) {
    if (m.alive && m.record.member != options_.member)
      next.peer_listeners.insert(next.peer_listeners.end(), m.record.listeners.begin(), m.record.listeners.end());
  }
  if (next == published_) return;
  published_ = std::move(next);
  changed_(published_);
}

void GroupMember::event_locked(std::string what) {
  spdlog::info("gateway group {}: member {} {}", options_.place.group, options_.member, what);
  events_.push_back(GroupEvent{unix_ms_now(), std::move(what)});
  if (events_.size() > kMaxEvents) events_.erase(events_.begin());
}

Result<void> GroupMember::hand_back_now(const std::string& member) {
  {
    std::lock_guard lock(mu_);
    if (member == options_.member) return make_error("a member does not hand back its own groups", EINVAL);
    if (held_.count(member) == 0)
      return make_error(fmt::format("member {} does not hold the lease of {}", options_.member, member), ENOENT);
  }
  hand_back(member);
  return {};
}

GroupMemberStatus GroupMember::status() const {
  std::lock_guard lock(mu_);
  GroupMemberStatus s;
  s.group = options_.place.group;
  s.member = options_.member;
  s.where = options_.place.pool_and_namespace();
  s.lease = options_.lease;
  s.failback = options_.failback;
  s.ownership = published_;
  s.members = members_;
  s.last_error = last_error_;
  s.events = events_;
  return s;
}

}  // namespace rdmablk::target::group
