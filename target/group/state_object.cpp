#include "target/group/state_object.h"

#include <cerrno>

#include <fmt/format.h>

namespace rdmablk::target::group {

namespace {

// How long the OSD keeps a watch of a client it no longer hears from (librados renews it meanwhile).
constexpr uint32_t kWatchTimeoutSeconds = 30;

}  // namespace

std::string state_object_name(const std::string& group) { return "rdmablk.group." + group; }

StateObject::StateObject(std::shared_ptr<backend::RadosCluster> cluster, rados_ioctx_t io, GroupPlace o)
    : cluster_(std::move(cluster)), io_(io), place_(std::move(o)), object_(state_object_name(place_.group)) {}

StateObject::~StateObject() {
  if (watching_) {
    backend::AsyncSignalsBlocked blocked;
    rados_unwatch2(io_, watch_cookie_);
    rados_watch_flush(cluster_->handle());  // no callback of ours runs after this
  }
  rados_ioctx_destroy(io_);
}

Result<std::unique_ptr<StateObject>> StateObject::open(std::shared_ptr<backend::RadosCluster> cluster,
                                                       const GroupPlace& o) {
  auto io = open_ioctx(*cluster, o, state_object_name(o.group), "group state");
  if (!io) return tl::unexpected(io.error());
  return std::unique_ptr<StateObject>(new StateObject(std::move(cluster), *io, o));
}

Result<StateObject::Snapshot> StateObject::read() {
  backend::AsyncSignalsBlocked blocked;
  std::lock_guard lock(version_mu_);
  // Read with room to spare: a buffer filled to the brim means the object grew since the stat; read again.
  for (std::size_t room = 64 * 1024;; room *= 4) {
    Snapshot s;
    s.bytes.resize(room);
    size_t got = 0;
    int read_rc = 0;
    rados_read_op_t op = rados_create_read_op();
    rados_read_op_read(op, 0, room, reinterpret_cast<char*>(s.bytes.data()), &got, &read_rc);
    const int rc = rados_read_op_operate(op, io_, object_.c_str(), 0);
    rados_release_read_op(op);
    if (rc == -ENOENT) return Snapshot{};
    if (rc < 0 || read_rc < 0) {
      return make_error(fmt::format("group state {}: read: {}", place_.where(object_),
                                    backend::rados_errstr(rc < 0 ? rc : read_rc)),
                        rc < 0 ? -rc : -read_rc);
    }
    if (got == room) continue;
    s.exists = true;
    s.version = rados_get_last_version(io_);
    s.bytes.resize(got);
    return s;
  }
}

Result<uint64_t> StateObject::write_if(const Snapshot& seen, std::span<const uint8_t> bytes) {
  backend::AsyncSignalsBlocked blocked;
  std::lock_guard lock(version_mu_);
  rados_write_op_t op = rados_create_write_op();
  if (seen.exists) {
    rados_write_op_assert_version(op, seen.version);
  } else {
    rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, nullptr);
  }
  rados_write_op_write_full(op, reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const int rc = rados_write_op_operate(op, io_, object_.c_str(), nullptr, 0);
  rados_release_write_op(op);
  // -ERANGE / -EOVERFLOW: the version moved on (or back: recreated); -EEXIST: created meanwhile; -ENOENT:
  // removed meanwhile. All mean the same to the writer: what it decided on is stale.
  if (rc == -ERANGE || rc == -EOVERFLOW || rc == -EEXIST || rc == -ENOENT) {
    return make_error(fmt::format("group state {}: changed by another member since it was read (version {}); "
                                  "read it again",
                                  place_.where(object_), seen.version),
                      ECANCELED);
  }
  if (rc < 0)
    return make_error(fmt::format("group state {}: write: {}", place_.where(object_), backend::rados_errstr(rc)), -rc);
  return rados_get_last_version(io_);
}

Result<void> StateObject::notify(std::chrono::milliseconds timeout) {
  backend::AsyncSignalsBlocked blocked;
  char* reply = nullptr;
  size_t reply_len = 0;
  const int rc =
      rados_notify2(io_, object_.c_str(), nullptr, 0, static_cast<uint64_t>(timeout.count()), &reply, &reply_len);
  if (reply != nullptr) rados_buffer_free(reply);
  if (rc == -ETIMEDOUT) {
    return make_error(fmt::format("group state {}: not every member acknowledged the change within {} ms",
                                  place_.where(object_), timeout.count()),
                      ETIMEDOUT);
  }
  if (rc < 0)
    return make_error(fmt::format("group state {}: notify: {}", place_.where(object_), backend::rados_errstr(rc)), -rc);
  return {};
}

Result<void> StateObject::watch(Changed changed) {
  if (watching_) return make_error(fmt::format("group state {}: already watched", place_.where(object_)), EALREADY);
  backend::AsyncSignalsBlocked blocked;
  changed_ = std::move(changed);
  const int rc = rados_watch3(io_, object_.c_str(), &watch_cookie_, &StateObject::on_notify,
                              &StateObject::on_watch_error, kWatchTimeoutSeconds, this);
  if (rc < 0)
    return make_error(fmt::format("group state {}: watch: {}", place_.where(object_), backend::rados_errstr(rc)), -rc);
  watching_ = true;
  return {};
}

Result<void> StateObject::create() {
  backend::AsyncSignalsBlocked blocked;
  rados_write_op_t op = rados_create_write_op();
  rados_write_op_create(op, LIBRADOS_CREATE_IDEMPOTENT, nullptr);
  const int rc = rados_write_op_operate(op, io_, object_.c_str(), nullptr, 0);
  rados_release_write_op(op);
  if (rc < 0)
    return make_error(fmt::format("group state {}: create: {}", place_.where(object_), backend::rados_errstr(rc)), -rc);
  return {};
}

Result<void> StateObject::rewatch() {
  if (!watching_) return make_error(fmt::format("group state {}: not watched", place_.where(object_)), EINVAL);
  {
    backend::AsyncSignalsBlocked blocked;
    rados_unwatch2(io_, watch_cookie_);  // an error here: the broken watch is gone already
  }
  watching_ = false;
  return watch(changed_);
}

void StateObject::on_notify(void* arg, uint64_t notify_id, uint64_t handle, uint64_t, void*, size_t) {
  auto* self = static_cast<StateObject*>(arg);
  self->changed_(false);
  // Acknowledged after the callback: the notifier's wait ends once every member has taken the change in.
  rados_notify_ack(self->io_, self->object_.c_str(), notify_id, handle, nullptr, 0);
}

void StateObject::on_watch_error(void* arg, uint64_t, int) { static_cast<StateObject*>(arg)->changed_(true); }

}  // namespace rdmablk::target::group
