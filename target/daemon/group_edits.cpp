#include "target/daemon/group_edits.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "backend/rados_cluster.h"
#include "target/daemon/daemon_group.h"
#include "target/manage/config_edits.h"

namespace rdmablk::target {

namespace {

constexpr std::chrono::milliseconds kNotifyTimeout{10'000};
// The reader rereads the state this often without being told: a change whose notification never came (its
// member died between storing it and notifying) reaches this member within it. A failed read is retried then.
constexpr std::chrono::seconds kRecheck{5};

}  // namespace

GroupEdits::GroupEdits(std::unique_ptr<group::StateObject> object, std::string where)
    : object_(std::move(object)), where_(std::move(where)), fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

GroupEdits::~GroupEdits() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (reader_.joinable()) reader_.join();
  object_.reset();  // unwatches: no callback runs after this
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<GroupEdits>> GroupEdits::open(const GroupConfig& group) {
  auto cluster = group_cluster(group);
  if (!cluster) return tl::unexpected(cluster.error());
  const group::GroupPlace place = group_place(group);
  auto object = group::StateObject::open(*cluster, place);
  if (!object) return make_error("group: " + object.error().message, object.error().errno_value);
  const std::string where = "group state " + place.where((*object)->object());
  std::unique_ptr<GroupEdits> g(new GroupEdits(std::move(*object), where));
  if (g->fd_ < 0) return make_error(fmt::format("eventfd: {}", std::strerror(errno)));
  GroupEdits* self = g.get();
  // On a librados thread: only wakes the reader thread.
  auto changed = [self](bool lost) {
    {
      std::lock_guard lock(self->mu_);
      (lost ? self->lost_ : self->notified_) = true;
    }
    self->wake_.notify_all();
  };
  if (auto c = g->object_->create(); !c) return make_error("group: " + c.error().message, c.error().errno_value);
  if (auto w = g->object_->watch(changed); !w) return make_error("group: " + w.error().message, w.error().errno_value);
  g->reader_ = std::thread([self] { self->read_loop(); });
  return g;
}

void GroupEdits::read_loop() {
  std::unique_lock lock(mu_);
  bool rewatch = false;  // the watch broke: set it up again before the next read
  std::string failing;   // the read error logged last (not logged again while it lasts)
  std::optional<std::pair<uint64_t, bool>> offered;  // the version (and existence) handed over last
  for (;;) {
    wake_.wait_for(lock, kRecheck, [&] { return stopping_ || notified_ || lost_; });
    if (stopping_) return;
    rewatch |= lost_;
    notified_ = lost_ = false;
    lock.unlock();
    Result<void> watched = rewatch ? object_->rewatch() : Result<void>{};
    auto snap = watched ? object_->read() : Result<group::StateObject::Snapshot>(tl::unexpected(watched.error()));
    lock.lock();
    if (!snap) {
      if (snap.error().message != failing)
        spdlog::error("{}: {} (retrying every {} s)", where_, snap.error().message, kRecheck.count());
      failing = snap.error().message;
      continue;
    }
    if (!failing.empty()) spdlog::info("{}: read again", where_);
    failing.clear();
    rewatch = false;
    if (snap->version == applied_version_ && snap->exists == last_.exists) continue;
    // Handed over once: a state the control thread refused is not offered (and refused) again every period.
    if (offered == std::pair{snap->version, snap->exists}) continue;
    offered = std::pair{snap->version, snap->exists};
    fresh_ = std::move(*snap);
    const uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(fd_, &one, sizeof one);
  }
}

Result<manage::ManagedConfig> GroupEdits::replay(const manage::ManagedConfig& running,
                                                 const group::StateObject::Snapshot& s) {
  std::vector<manage::ManagedEdit> edits;
  if (s.exists && !s.bytes.empty()) {  // created empty by the first member: no edits yet
    auto decoded = manage::decode_edits(s.bytes, where_);
    if (!decoded) return tl::unexpected(decoded.error());
    edits = std::move(*decoded);
  }
  return manage::with_edits(running, std::move(edits), where_);
}

Result<manage::ManagedConfig> GroupEdits::load(const manage::ManagedConfig& running) {
  auto snap = object_->read();
  if (!snap) return tl::unexpected(snap.error());
  auto next = replay(running, *snap);
  if (!next) return tl::unexpected(next.error());
  std::lock_guard lock(mu_);
  last_ = std::move(*snap);
  return next;
}

std::optional<Result<manage::ManagedConfig>> GroupEdits::take_change(const manage::ManagedConfig& running) {
  uint64_t v;
  [[maybe_unused]] auto r = ::read(fd_, &v, sizeof v);
  std::optional<group::StateObject::Snapshot> snap;
  {
    std::lock_guard lock(mu_);
    snap.swap(fresh_);
    if (!snap || snap->version == applied_version_) return std::nullopt;
    last_ = *snap;
  }
  return replay(running, *snap);
}

void GroupEdits::applied(uint64_t version) {
  std::lock_guard lock(mu_);
  applied_version_ = version;
}

uint64_t GroupEdits::last_version() const {
  std::lock_guard lock(mu_);
  return last_.version;
}

Result<manage::Proposal> GroupEdits::propose(const manage::ManagedConfig& running, const std::string& verb,
                                             const nlohmann::json& params) {
  if (verb == "listener_add" || verb == "listener_remove" || verb == "ana_set") {
    return make_error(fmt::format("{} is local to a member of a gateway group (its listeners and ANA states are its "
                                  "own YAML's and the group's): edit the member's config file and reload",
                                  verb),
                      EINVAL);
  }
  if (manage::has_inline_secret(params)) {
    return make_error(
        "a gateway group's state is readable by every member's Ceph user: give secrets as files "
        "(dhchap_key_file, dhchap_ctrl_key_file, tls_psk_file), not inline",
        EINVAL);
  }
  auto current = load(running);  // the group as it is now, which this change builds on
  if (!current) return tl::unexpected(current.error());
  group::StateObject::Snapshot seen;
  {
    std::lock_guard lock(mu_);
    seen = last_;
  }
  auto proposal = manage::propose_edit(*current, verb, params);
  if (!proposal || !proposal->changed) return proposal;
  const std::string bytes = manage::encode_edits(proposal->next.edits);
  auto written = object_->write_if(seen, std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  if (!written) {
    if (written.error().errno_value == ECANCELED) {
      return make_error(fmt::format("conflict: another member changed the group while this change was made "
                                    "({}); nothing of it was stored: look at the group and try again",
                                    where_),
                        ECANCELED);
    }
    return tl::unexpected(written.error());
  }
  std::lock_guard lock(mu_);
  last_.exists = true;
  last_.version = *written;
  last_.bytes.assign(bytes.begin(), bytes.end());
  return proposal;
}

void GroupEdits::notify_members() {
  if (auto r = object_->notify(kNotifyTimeout); !r) {
    spdlog::warn("{}: not every member acknowledged the change yet ({}); they reread at their next check", where_,
                 r.error().message);
  }
}

}  // namespace rdmablk::target
