#include "target/group/member_lease.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <vector>

#include <fmt/format.h>

namespace rdmablk::target::group {

namespace {

// Unique per holder instance: the OSD tells lock holders apart by (client, cookie), and a process may hold
// several members' leases (its own and those it took over).
std::string new_cookie(const std::string& holder) {
  static std::atomic<unsigned> counter{0};
  char host[64] = {};
  ::gethostname(host, sizeof host - 1);
  return fmt::format("{}@{}:{}:{}", holder, host, ::getpid(), counter.fetch_add(1));
}

// Splits a NUL-separated list as rados_list_lockers returns it.
std::vector<std::string> split_nul(const char* buf, size_t len) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i < len; ++i) {
    if (buf[i] == '\0') {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(buf[i]);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// "COOKIE at ADDRESS", the lease's current holder as the OSD lists it (for an error message).
std::string holder_of(rados_ioctx_t io, const std::string& object, const std::string& lock) {
  auto h = lock_holder(io, object, lock);
  return h && h->held ? fmt::format("{} at {}", h->cookie, h->address) : "unknown";
}

timeval duration_of(const LeaseOptions& o) { return timeval{static_cast<time_t>(o.duration.count()), 0}; }

}  // namespace

std::string lease_object(const std::string& group, const std::string& member) {
  return fmt::format("rdmablk.group.{}.member.{}", group, member);
}

Result<LockHolder> lock_holder(rados_ioctx_t io, const std::string& object, const std::string& lock) {
  backend::AsyncSignalsBlocked blocked;
  int exclusive = 0;
  char tag[256], clients[4096], cookies[4096], addrs[4096];
  size_t tag_len = sizeof tag, clients_len = sizeof clients, cookies_len = sizeof cookies, addrs_len = sizeof addrs;
  const ssize_t n = rados_list_lockers(io, object.c_str(), lock.c_str(), &exclusive, tag, &tag_len, clients,
                                       &clients_len, cookies, &cookies_len, addrs, &addrs_len);
  if (n == -ENOENT) return LockHolder{};
  if (n < 0)
    return make_error(fmt::format("lock {}: {}", lock, backend::rados_errstr(static_cast<int>(n))),
                      static_cast<int>(-n));
  LockHolder h;
  if (n == 0) return h;
  const auto c = split_nul(cookies, cookies_len);
  const auto a = split_nul(addrs, addrs_len);
  h.held = true;
  if (!c.empty()) {
    h.cookie = c.front();
    h.holder = h.cookie.substr(0, h.cookie.find('@'));
  }
  if (!a.empty()) h.address = a.front();
  return h;
}

MemberLease::MemberLease(std::shared_ptr<backend::RadosCluster> cluster, rados_ioctx_t io, LeaseOptions o,
                         std::string cookie)
    : cluster_(std::move(cluster)),
      io_(io),
      options_(std::move(o)),
      object_(lease_object(options_.place.group, options_.member)),
      cookie_(std::move(cookie)) {}

MemberLease::~MemberLease() {
  // Not released here: a holder that goes away without release() (a crash) is what the lease is for, and a
  // destructor must not wait for the cluster. The lease lapses by itself.
  rados_ioctx_destroy(io_);
}

Result<std::unique_ptr<MemberLease>> MemberLease::lock(std::shared_ptr<backend::RadosCluster> cluster,
                                                       const LeaseOptions& o, const std::string& holder) {
  if (o.member.empty()) return make_error("member lease: the member is required", EINVAL);
  if (o.duration.count() <= 0) return make_error("member lease: the duration must be positive", EINVAL);
  if (o.lock.empty()) return make_error("member lease: the lock name is required", EINVAL);
  const std::string object = lease_object(o.place.group, o.member);
  auto opened = open_ioctx(*cluster, o.place, object, "member lease");
  if (!opened) return tl::unexpected(opened.error());
  rados_ioctx_t io = *opened;
  backend::AsyncSignalsBlocked blocked;  // librados may start threads
  std::string cookie = new_cookie(holder);
  timeval duration = duration_of(o);
  const std::string description = fmt::format("rdmablk member {} held by {}", o.member, holder);
  const int rc =
      rados_lock_exclusive(io, object.c_str(), o.lock.c_str(), cookie.c_str(), description.c_str(), &duration, 0);
  if (rc < 0) {
    std::string message =
        rc == -EBUSY ? fmt::format("member lease {}: held by {}", o.place.where(object), holder_of(io, object, o.lock))
                     : fmt::format("member lease {}: {}", o.place.where(object), backend::rados_errstr(rc));
    rados_ioctx_destroy(io);
    return make_error(std::move(message), -rc);
  }
  return std::unique_ptr<MemberLease>(new MemberLease(std::move(cluster), io, o, std::move(cookie)));
}

Result<std::unique_ptr<MemberLease>> MemberLease::acquire(std::shared_ptr<backend::RadosCluster> cluster,
                                                          const LeaseOptions& o) {
  return lock(std::move(cluster), o, o.member);
}

Result<std::unique_ptr<MemberLease>> MemberLease::take_over(std::shared_ptr<backend::RadosCluster> cluster,
                                                            const LeaseOptions& o, const std::string& taker) {
  if (taker.empty()) return make_error("member lease: the taker is required", EINVAL);
  return lock(std::move(cluster), o, taker);
}

Result<void> MemberLease::renew() {
  if (!held_) return make_error(fmt::format("member lease {}: released", options_.place.where(object_)), ENOENT);
  backend::AsyncSignalsBlocked blocked;
  timeval duration = duration_of(options_);
  const int rc = rados_lock_exclusive(io_, object_.c_str(), options_.lock.c_str(), cookie_.c_str(), "", &duration,
                                      LIBRADOS_LOCK_FLAG_MUST_RENEW);
  if (rc == -ENOENT || rc == -EBUSY) {
    held_ = false;
    return make_error(fmt::format("member lease {}: lost (it lapsed{})", options_.place.where(object_),
                                  rc == -EBUSY ? " and was taken" : ""),
                      ENOENT);
  }
  if (rc < 0)
    return make_error(fmt::format("member lease {}: renewal failed: {}", options_.place.where(object_),
                                  backend::rados_errstr(rc)),
                      -rc);
  return {};
}

Result<void> MemberLease::release() {
  if (!held_) return {};
  backend::AsyncSignalsBlocked blocked;
  const int rc = rados_unlock(io_, object_.c_str(), options_.lock.c_str(), cookie_.c_str());
  held_ = false;
  if (rc < 0 && rc != -ENOENT)
    return make_error(fmt::format("member lease {}: release failed: {}", options_.place.where(object_),
                                  backend::rados_errstr(rc)),
                      -rc);
  return {};
}

}  // namespace rdmablk::target::group
