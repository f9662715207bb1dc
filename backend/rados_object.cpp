#include "backend/rados_object.h"

#include <cerrno>

#include <fmt/format.h>

namespace rdmablk::backend {

namespace {

// How long the OSD keeps a watch of a client it no longer hears from (librados renews it meanwhile).
constexpr uint32_t kWatchTimeoutSeconds = 30;

}  // namespace

RadosObject::RadosObject(std::shared_ptr<RadosCluster> cluster, rados_ioctx_t io, std::string oid, std::string what,
                         std::string where)
    : cluster_(std::move(cluster)),
      io_(io),
      object_(std::move(oid)),
      what_(std::move(what)),
      where_(std::move(where)) {}

RadosObject::~RadosObject() {
  if (watching_) {
    AsyncSignalsBlocked blocked;
    rados_unwatch2(io_, watch_cookie_);
    rados_watch_flush(cluster_->handle());  // no callback of ours runs after this
  }
  rados_ioctx_destroy(io_);
}

Result<RadosObject::Snapshot> RadosObject::read() {
  AsyncSignalsBlocked blocked;
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
      return make_error(fmt::format("{} {}: read: {}", what_, where_, rados_errstr(rc < 0 ? rc : read_rc)),
                        rc < 0 ? -rc : -read_rc);
    }
    if (got == room) continue;
    s.exists = true;
    s.version = rados_get_last_version(io_);
    s.bytes.resize(got);
    return s;
  }
}

Result<uint64_t> RadosObject::write_if(const Snapshot& seen, std::span<const uint8_t> bytes) {
  AsyncSignalsBlocked blocked;
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
    return make_error(fmt::format("{} {}: changed by another member since it was read (version {}); "
                                  "read it again",
                                  what_, where_, seen.version),
                      ECANCELED);
  }
  if (rc < 0) return make_error(fmt::format("{} {}: write: {}", what_, where_, rados_errstr(rc)), -rc);
  return rados_get_last_version(io_);
}

Result<void> RadosObject::notify(std::chrono::milliseconds timeout) {
  AsyncSignalsBlocked blocked;
  char* reply = nullptr;
  size_t reply_len = 0;
  const int rc =
      rados_notify2(io_, object_.c_str(), nullptr, 0, static_cast<uint64_t>(timeout.count()), &reply, &reply_len);
  if (reply != nullptr) rados_buffer_free(reply);
  if (rc == -ETIMEDOUT) {
    return make_error(fmt::format("{} {}: not every member acknowledged the change within {} ms", what_, where_,
                                  timeout.count()),
                      ETIMEDOUT);
  }
  if (rc < 0) return make_error(fmt::format("{} {}: notify: {}", what_, where_, rados_errstr(rc)), -rc);
  return {};
}

Result<void> RadosObject::watch(Changed changed) {
  if (watching_) return make_error(fmt::format("{} {}: already watched", what_, where_), EALREADY);
  AsyncSignalsBlocked blocked;
  changed_ = std::move(changed);
  const int rc = rados_watch3(io_, object_.c_str(), &watch_cookie_, &RadosObject::on_notify,
                              &RadosObject::on_watch_error, kWatchTimeoutSeconds, this);
  if (rc < 0) return make_error(fmt::format("{} {}: watch: {}", what_, where_, rados_errstr(rc)), -rc);
  watching_ = true;
  return {};
}

Result<void> RadosObject::create() {
  AsyncSignalsBlocked blocked;
  rados_write_op_t op = rados_create_write_op();
  rados_write_op_create(op, LIBRADOS_CREATE_IDEMPOTENT, nullptr);
  const int rc = rados_write_op_operate(op, io_, object_.c_str(), nullptr, 0);
  rados_release_write_op(op);
  if (rc < 0) return make_error(fmt::format("{} {}: create: {}", what_, where_, rados_errstr(rc)), -rc);
  return {};
}

Result<void> RadosObject::rewatch() {
  if (!watching_) return make_error(fmt::format("{} {}: not watched", what_, where_), EINVAL);
  {
    AsyncSignalsBlocked blocked;
    rados_unwatch2(io_, watch_cookie_);  // an error here: the broken watch is gone already
  }
  watching_ = false;
  return watch(changed_);
}

void RadosObject::on_notify(void* arg, uint64_t notify_id, uint64_t handle, uint64_t, void*, size_t) {
  auto* self = static_cast<RadosObject*>(arg);
  self->changed_(false);
  // Acknowledged after the callback: the notifier's wait ends once every member has taken the change in.
  rados_notify_ack(self->io_, self->object_.c_str(), notify_id, handle, nullptr, 0);
}

void RadosObject::on_watch_error(void* arg, uint64_t, int) { static_cast<RadosObject*>(arg)->changed_(true); }

}  // namespace rdmablk::backend
