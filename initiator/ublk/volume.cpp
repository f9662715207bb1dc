#include "initiator/ublk/volume.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "initiator/ublk/queue.h"
#include "initiator/ublk/reconnect.h"

namespace rdmablk::initiator::ublk {

namespace {

using Clock = std::chrono::steady_clock;

// One path: a controller of the subsystem through one address.
struct Path {
  Path(transport::TransportAddress a, const AttachOptions& o)
      : address(std::move(a)), policy(o.ctrl_loss_tmo, o.reconnect_delay) {}
  transport::TransportAddress address;
  std::unique_ptr<Controller> ctrl;
  ReconnectPolicy policy;  // its own backoff; its loss timeout is not used (the volume has one)
  PathConnection connection = PathConnection::connecting;
  std::optional<protocol::AnaState> ana;
  uint32_t anagrpid = 0;
  bool ana_stale = false;         // re-read the log (ANA Change notice, a path-related status)
  Clock::time_point ana_read{};   // last read
  Clock::time_point switch_retry{};  // I/O queues could not be connected: not before then
};

// The supervisor of one attachment (see volume.h). Owns the Controllers; queue threads own the IoQueues
// made from them, so a Controller is destroyed only once no queue holds a connection of its path.
class Supervisor {
 public:
  Supervisor(const AttachOptions& o, const VolumeEvents& ev) : o_(o), ev_(ev) {
    if (o_.paths.empty()) o_.paths.push_back(o_.controller.address);
    for (const auto& a : o_.paths) paths_.emplace_back(a, o_);
  }
  ~Supervisor() { teardown(); }

  Result<void> attach();
  void supervise(int stop_fd);

 private:
  // attach(), step by step.
  Result<std::size_t> connect_paths(uint16_t want_queues);  // the path to use first
  uint32_t transfer_limit(const Controller& ctrl) const;
  Result<void> add_device(uint16_t nr, uint16_t depth, Geometry& geometry, std::vector<std::unique_ptr<IoQueue>>& ios);
  Result<void> open_char_device();
  Result<void> create_queues(const Geometry& geometry, std::vector<std::unique_ptr<IoQueue>>& ios, std::size_t chosen);
  Result<void> start_device(const Geometry& geometry);
  Result<std::unique_ptr<Controller>> connect_controller(std::size_t path, uint16_t want_queues);
  Result<std::vector<std::unique_ptr<IoQueue>>> connect_io_queues(Controller& ctrl, uint16_t count);
  // Connect (or reconnect) path i: controller, namespace checks, ANA. Marks it live on success.
  Result<void> bring_up_path(std::size_t i, uint16_t want_queues);
  Result<void> check_same_volume(const Controller& ctrl) const;
  Result<void> read_ana(std::size_t i);
  void path_lost(std::size_t i, const std::string& why);
  bool wait_released(int path);  // false: a queue still holds a connection of `path` after 30 s
  bool switch_to(std::size_t i, const char* why);
  void service_paths();
  // Keep-alive (and AER reaping) on every live path, between steps that block this thread.
  void keep_alive_all() noexcept {
    for (auto& p : paths_) {
      if (p.connection == PathConnection::live && p.ctrl) p.ctrl->service();
    }
  }
  void steer();
  void update_state(Clock::time_point now);
  std::vector<PathStatus> statuses() const;
  std::string label(std::size_t i) const { return transport::to_uri(paths_[i].address); }
  bool any_finished() const;
  bool stop_requested() const {
    pollfd p{stop_fd_, POLLIN, 0};
    return stop_fd_ >= 0 && ::poll(&p, 1, 0) > 0;
  }
  void publish(std::string_view s);
  void teardown() noexcept;

  AttachOptions o_;
  VolumeEvents ev_;
  std::vector<Path> paths_;
  std::optional<std::size_t> active_;  // the path the queues' connections are on
  std::optional<Clock::time_point> no_path_since_;
  AttachedVolume vol_;
  std::string state_;  // last published volume state
  std::string published_;  // last published path summary (publish again when it changes)
  std::unique_ptr<Control> control_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<std::thread> threads_;
  int efd_ = -1;
  int cdev_fd_ = -1;
  bool added_ = false;
  bool started_ = false;
  bool failing_ = false;
  bool announced_ = false;  // ready sent: state changes are reported from now on
  bool paused_ = false;  // queues hold I/O after a path-related status: resume or switch
  int stop_fd_ = -1;
  std::optional<NamespaceInfo> ns_at_attach_;
  bool torn_down_ = false;
};

Result<std::unique_ptr<Controller>> Supervisor::connect_controller(std::size_t path, uint16_t want_queues) {
  ControllerOptions co = o_.controller;
  co.address = paths_[path].address;
  co.io_queues = want_queues;
  if (paths_.size() > 1 && started_ && co.kato_ms != 0) {
    // This thread keeps the other paths' keep-alives going: a reconnect attempt to a host that does not
    // answer must not block it for longer than half a KATO (their targets would drop them).
    co.connect_timeout = std::min(co.connect_timeout,
                                  std::max(std::chrono::milliseconds(1000), std::chrono::milliseconds(co.kato_ms / 2)));
  }
  auto ctrl = Controller::connect(co);
  if (!ctrl) return tl::unexpected(ctrl.error());
  if ((*ctrl)->find_namespace(o_.nsid) == nullptr) {
    std::string active;
    for (const auto& ns : (*ctrl)->namespaces()) active += (active.empty() ? "" : ",") + std::to_string(ns.nsid);
    return make_error(fmt::format("{}: no active namespace {} (active: {})", (*ctrl)->where(), o_.nsid,
                                  active.empty() ? "none" : active),
                      ENOENT);
  }
  return ctrl;
}

Result<std::vector<std::unique_ptr<IoQueue>>> Supervisor::connect_io_queues(Controller& ctrl, uint16_t count) {
  if (ctrl.granted_io_queues() < count) {
    return make_error(fmt::format("{}: the controller grants {} I/O queues, the device has {}", ctrl.where(),
                                  ctrl.granted_io_queues(), count),
                      EAGAIN);
  }
  std::vector<std::unique_ptr<IoQueue>> out;
  for (uint16_t q = 1; q <= count; ++q) {
    if (stop_requested()) return make_error("stopping", ECANCELED);  // each connect may take seconds
    auto io = ctrl.connect_io_queue(q, o_.queue_size);
    if (!io) return tl::unexpected(io.error());
    out.push_back(std::move(*io));
  }
  return out;
}

// Every path must show the namespace seen first: the same identifiers, block size and transfer limit.
Result<void> Supervisor::check_same_volume(const Controller& ctrl) const {
  if (!ns_at_attach_) return {};
  const NamespaceInfo& ns = *ctrl.find_namespace(o_.nsid);
  const NamespaceInfo& before = *ns_at_attach_;
  if (ns.nguid != before.nguid || ns.eui64 != before.eui64 || ns.uuid != before.uuid) {
    return make_error(fmt::format("{}: namespace {} has other identifiers (NGUID/EUI64/UUID) than the volume: "
                                  "not the same volume",
                                  ctrl.where(), o_.nsid),
                      EINVAL);
  }
  if (ns.block_size != before.block_size) {
    return make_error(fmt::format("{}: namespace {} has {}-byte blocks, the volume {}", ctrl.where(), o_.nsid,
                                  ns.block_size, before.block_size),
                      EINVAL);
  }
  if (started_) {
    const uint32_t limit = ctrl.max_transfer_bytes();
    if (limit != 0 && limit < vol_.geometry.max_io_bytes) {
      return make_error(fmt::format("{}: the controller takes at most {} bytes per command, the device sends up to {}",
                                    ctrl.where(), limit, vol_.geometry.max_io_bytes),
                        EINVAL);
    }
    if (ns.size_blocks * ns.block_size != vol_.geometry.size_bytes) {
      spdlog::warn("{}: namespace {} through {} has {} bytes; the device keeps its {}", vol_.device, o_.nsid,
                   ctrl.where(), ns.size_blocks * ns.block_size, vol_.geometry.size_bytes);
    }
  }
  return {};
}

Result<void> Supervisor::read_ana(std::size_t i) {
  Path& p = paths_[i];
  p.ana_stale = false;
  p.ana_read = Clock::now();
  if (!p.ctrl->reports_ana()) {
    p.ana.reset();
    return {};
  }
  auto page = p.ctrl->read_ana_log();
  if (!page) return tl::unexpected(page.error());
  auto log = parse_ana_log(*page);
  if (!log) return make_error(fmt::format("{}: {}", p.ctrl->where(), log.error().message), EPROTO);
  auto state = ana_state_of(*log, o_.nsid, p.anagrpid);
  // A namespace in no group the log lists cannot be reached through this controller.
  const auto before = p.ana;
  p.ana = state.value_or(protocol::AnaState::inaccessible);
  if (before != p.ana) {
    spdlog::info("{}: path {}: ANA state {}{}", vol_.device.empty() ? o_.controller.subnqn : vol_.device, label(i),
                 ana_state_text(p.ana), state ? "" : " (the namespace is in no group of its ANA log)");
  }
  return {};
}

Result<void> Supervisor::bring_up_path(std::size_t i, uint16_t want_queues) {
  Path& p = paths_[i];
  auto ctrl = connect_controller(i, want_queues);
  if (!ctrl) return tl::unexpected(ctrl.error());
  if (auto r = check_same_volume(**ctrl); !r) {
    // A path to another namespace would mix two volumes' data: never use it.
    p.connection = PathConnection::failed;
    (void)(*ctrl)->shutdown(std::chrono::milliseconds(2000));
    return r;
  }
  const NamespaceInfo& ns = *(*ctrl)->find_namespace(o_.nsid);
  if (!ns_at_attach_) ns_at_attach_ = ns;
  p.anagrpid = ns.id.anagrpid.get();
  p.ctrl = std::move(*ctrl);
  if (p.ctrl->reports_ana()) {
    // Without notices the state is still re-read on path errors and while unusable.
    if (auto r = p.ctrl->enable_ana_events(); !r) spdlog::warn("{}: ANA Change notices: {}", label(i), r.error().message);
  }
  if (auto r = read_ana(i); !r) {
    p.ctrl.reset();
    return r;
  }
  p.connection = PathConnection::live;
  p.policy.reconnected();
  return {};
}

std::vector<PathStatus> Supervisor::statuses() const {
  std::vector<PathStatus> out;
  for (const auto& p : paths_) out.push_back({p.connection, p.ana});
  return out;
}

Result<void> Supervisor::attach() {
  // ublk first: where it is missing, say so before touching the network.
  auto control = Control::open(o_.control_path);
  if (!control) return tl::unexpected(control.error());
  control_ = std::move(*control);
  efd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd_ < 0) return make_error(fmt::format("eventfd: {}", std::strerror(errno)), errno);

  uint16_t want = o_.io_queues;
  if (want == 0) want = static_cast<uint16_t>(std::clamp(std::thread::hardware_concurrency(), 1u, 64u));
  auto chosen = connect_paths(want);
  if (!chosen) return tl::unexpected(chosen.error());
  Controller& ctrl = *paths_[*chosen].ctrl;
  const NamespaceInfo& ns = *ctrl.find_namespace(o_.nsid);
  auto geometry = geometry_for(ctrl.identity(), ns, transfer_limit(ctrl));
  if (!geometry) return make_error(ctrl.where() + ": " + geometry.error().message, EINVAL);
  const auto nr = std::min<uint16_t>(want, ctrl.granted_io_queues());
  if (nr == 0) return make_error(ctrl.where() + ": the controller granted no I/O queue", EIO);
  auto ios = connect_io_queues(ctrl, nr);
  if (!ios) return tl::unexpected(ios.error());
  // As the Linux host sizes its tag sets: one entry fewer than the queue has (SQSIZE is 0-based).
  const uint16_t entries = std::min((*ios)[0]->queue().entries(), o_.queue_size);
  const uint16_t depth = std::min<uint16_t>(std::max<uint16_t>(entries, 2) - 1, kMaxQueueDepth);

  vol_.where = ctrl.where();
  if (auto r = add_device(nr, depth, *geometry, *ios); !r) return r;
  if (auto r = open_char_device(); !r) return r;
  if (auto r = create_queues(*geometry, *ios, *chosen); !r) return r;
  return start_device(*geometry);
}

Result<std::size_t> Supervisor::connect_paths(uint16_t want) {
  std::optional<Error> first_error;
  for (std::size_t i = 0; i < paths_.size(); ++i) {
    if (auto r = bring_up_path(i, want); !r) {
      if (paths_.size() == 1) return tl::unexpected(r.error());  // one path: its error is the attach's
      spdlog::warn("path {}: {}", label(i), r.error().message);
      if (!first_error) first_error = r.error();
      if (paths_[i].connection != PathConnection::failed) {
        paths_[i].policy.lost(Clock::now());
        paths_[i].policy.attempt_failed(Clock::now());
      }
    }
  }
  auto chosen = choose_path(statuses(), std::nullopt);
  if (chosen) return *chosen;
  std::string states;
  for (std::size_t i = 0; i < paths_.size(); ++i) {
    states += fmt::format("{}{} {} (ANA {})", states.empty() ? "" : ", ", label(i),
                          path_connection_name(paths_[i].connection), ana_state_text(paths_[i].ana));
  }
  if (first_error && std::none_of(paths_.begin(), paths_.end(), [](const Path& p) { return p.ctrl != nullptr; })) {
    return make_error(fmt::format("no path could be connected ({}); first error: {}", states, first_error->message),
                      first_error->errno_value);
  }
  return make_error(fmt::format("no usable path to namespace {}: {}", o_.nsid, states), EHOSTUNREACH);
}

// The device's I/O size must fit every path it may move to.
uint32_t Supervisor::transfer_limit(const Controller& ctrl) const {
  uint32_t limit = ctrl.max_transfer_bytes();
  for (const auto& p : paths_) {
    if (!p.ctrl) continue;
    const uint32_t l = p.ctrl->max_transfer_bytes();
    if (l != 0 && (limit == 0 || l < limit)) limit = l;
  }
  return limit;
}

// ADD_DEV and SET_PARAMS; the surplus I/O queues disconnect when the driver grants fewer queues.
Result<void> Supervisor::add_device(uint16_t nr, uint16_t depth, Geometry& geometry,
                                    std::vector<std::unique_ptr<IoQueue>>& ios) {
  ublksrv_ctrl_dev_info want_info{};
  want_info.nr_hw_queues = nr;
  want_info.queue_depth = depth;
  want_info.max_io_buf_bytes = geometry.max_io_bytes;
  want_info.dev_id = UINT32_MAX;
  want_info.flags = control_->io_flags();
  auto info = control_->add_device(want_info);
  if (!info) return tl::unexpected(info.error());
  added_ = true;
  vol_.dev_id = info->dev_id;
  vol_.device = block_device_path(info->dev_id);
  // The driver may grant less than asked: queues (at most one per CPU), depth, buffer size (pages).
  if (info->nr_hw_queues == 0 || info->nr_hw_queues > nr || info->queue_depth == 0 || info->queue_depth > depth ||
      info->max_io_buf_bytes < geometry.block_size || info->max_io_buf_bytes > geometry.max_io_bytes) {
    return make_error(fmt::format("ublk ADD_DEV granted {} queue(s) x {}, {} byte buffers for {} x {}, {} bytes",
                                  info->nr_hw_queues, info->queue_depth, info->max_io_buf_bytes, nr, depth,
                                  geometry.max_io_bytes),
                      EINVAL);
  }
  if (info->nr_hw_queues < nr) {
    spdlog::info("{}: the driver grants {} queue(s) of the {} asked for", vol_.device, info->nr_hw_queues, nr);
  }
  ios.resize(info->nr_hw_queues);  // the surplus I/O queues disconnect here
  vol_.queues = info->nr_hw_queues;
  vol_.depth = info->queue_depth;
  geometry.max_io_bytes = info->max_io_buf_bytes;
  vol_.geometry = geometry;
  return control_->set_params(vol_.dev_id, params_for(geometry));
}

Result<void> Supervisor::open_char_device() {
  // devtmpfs creates the node with the device; udev may still be renaming permissions: retry briefly.
  const std::string cdev = char_device_path(vol_.dev_id);
  for (int i = 0; i < 100; ++i) {
    cdev_fd_ = ::open(cdev.c_str(), O_RDWR | O_CLOEXEC);
    if (cdev_fd_ >= 0 || errno != ENOENT) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (cdev_fd_ < 0) return make_error(fmt::format("cannot open {}: {}", cdev, std::strerror(errno)), errno);
  return {};
}

// One ublk queue per I/O queue, each handed its connection on path `chosen`, and their threads.
Result<void> Supervisor::create_queues(const Geometry& geometry, std::vector<std::unique_ptr<IoQueue>>& ios,
                                       std::size_t chosen) {
  for (uint16_t q = 0; q < vol_.queues; ++q) {
    QueueConfig qc;
    qc.dev_id = vol_.dev_id;
    qc.q_id = q;
    qc.depth = vol_.depth;
    qc.cdev_fd = cdev_fd_;
    qc.ioctl_encoded = control_->ioctl_encoded();
    qc.nsid = o_.nsid;
    qc.geometry = geometry;
    auto queue = Queue::create(qc, efd_);
    if (!queue) return tl::unexpected(queue.error());
    (*queue)->give_connection(std::move(ios[q]), static_cast<int>(chosen));
    queues_.push_back(std::move(*queue));
  }
  active_ = chosen;
  for (auto& q : queues_) threads_.emplace_back([p = q.get()] { p->run(); });
  return {};
}

// START_DEV, then the volume is live: logged, published, and the ready event sent.
Result<void> Supervisor::start_device(const Geometry& geometry) {
  // START_DEV adds the disk, which reads the partition table through the queues while this thread
  // waits: nobody could reconnect meanwhile, so a connection lost now fails those reads, not hangs them.
  for (auto& q : queues_) q->set_fail_fast(true);
  if (auto r = control_->start(vol_.dev_id, ::getpid()); !r) return r;
  started_ = true;
  for (auto& q : queues_) q->set_fail_fast(false);
  spdlog::info("{}: namespace {} attached as {} ({} bytes, {}-byte blocks, {} queue(s) x {}, max I/O {} KiB{}{}{})",
               vol_.where, o_.nsid, vol_.device, geometry.size_bytes, geometry.block_size, vol_.queues, vol_.depth,
               geometry.max_io_bytes / 1024, geometry.volatile_cache ? ", flush" : "",
               geometry.discard ? ", discard" : "", geometry.write_zeroes ? ", write zeroes" : "");
  if (paths_.size() > 1) {
    for (std::size_t i = 0; i < paths_.size(); ++i) {
      spdlog::info("{}: path {}: {}, ANA {}{}", vol_.device, label(i), path_connection_name(paths_[i].connection),
                   ana_state_text(paths_[i].ana), active_ == i ? " (in use)" : "");
    }
  }
  state_ = "live";
  publish("live");  // fills vol_.paths for the ready event
  if (ev_.ready) ev_.ready(vol_);
  announced_ = true;
  return {};
}

void Supervisor::publish(std::string_view s) {
  vol_.paths.clear();
  std::string summary(s);
  for (std::size_t i = 0; i < paths_.size(); ++i) {
    PathView v;
    v.address = paths_[i].address;
    v.connection = paths_[i].connection;
    v.ana = paths_[i].ana;
    v.in_use = active_ == i;
    summary += fmt::format("|{}{}{}", static_cast<int>(v.connection), ana_state_text(v.ana), v.in_use);
    vol_.paths.push_back(v);
  }
  if (active_ && paths_[*active_].ctrl) vol_.where = paths_[*active_].ctrl->where();
  if (summary == published_) return;
  published_ = summary;
  if (ev_.state && announced_) ev_.state(vol_, s);
}

bool Supervisor::any_finished() const {
  return std::any_of(queues_.begin(), queues_.end(), [](const auto& q) { return q->finished(); });
}

bool Supervisor::wait_released(int path) {
  // The queue threads answer their mailbox within one loop turn; a stuck one would hang the
  // supervisor, so this is bounded and loud.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (std::any_of(queues_.begin(), queues_.end(), [&](const auto& q) { return q->holds_path(path) && !q->finished(); })) {
    if (Clock::now() > deadline) {
      spdlog::error("{}: a ublk queue did not release its connection in 30 s", vol_.device);
      return false;
    }
    pollfd p{efd_, POLLIN, 0};
    (void)::poll(&p, 1, 100);
    uint64_t v = 0;
    (void)!::read(efd_, &v, sizeof(v));
    keep_alive_all();
  }
  return true;
}

void Supervisor::path_lost(std::size_t i, const std::string& why) {
  Path& p = paths_[i];
  const bool was_active = active_ == i;
  if (paths_.size() == 1) {
    spdlog::warn("{}: connection to {} lost ({}); I/O is held while reconnecting{}", vol_.device, vol_.where, why,
                 o_.ctrl_loss_tmo.count() >= 0 ? fmt::format(" (up to {} s, then it fails)", o_.ctrl_loss_tmo.count())
                                                : std::string());
  } else {
    spdlog::warn("{}: path {} lost ({}){}; reconnecting it in the background", vol_.device, label(i), why,
                 was_active ? ": I/O moves to another path" : "");
  }
  // Queues still on it (in use, or draining after a switch) close it; what it had on the wire is held.
  for (auto& q : queues_) q->drop_connection(static_cast<int>(i));
  if (!wait_released(static_cast<int>(i))) {
    (void)p.ctrl.release();  // a queue may still use it: leaking it is the safe choice
  }
  // Other queues saw the same loss (flagged before they let go): handled here, not again once the path
  // is back.
  for (auto& q : queues_) q->clear_lost(static_cast<int>(i));
  p.ctrl.reset();
  if (was_active) active_.reset();
  p.connection = PathConnection::connecting;
  p.ana.reset();
  p.policy.lost(Clock::now());
}

// Moves I/O to path i: its I/O queues are connected here, each ublk queue drains the old connection
// (if it still works) and then serves on the new one.
bool Supervisor::switch_to(std::size_t i, const char* why) {
  Path& p = paths_[i];
  auto ios = connect_io_queues(*p.ctrl, vol_.queues);
  keep_alive_all();
  if (!ios) {
    // The controller is alive (keep-alive decides that); the target may still be tearing down queues
    // of the same IDs from before. Try again shortly.
    spdlog::warn("{}: cannot move I/O to {}: {}", vol_.device, label(i), ios.error().message);
    p.switch_retry = Clock::now() + std::chrono::seconds(1);
    return false;
  }
  spdlog::info("{}: I/O {} path {} (ANA {}){}", vol_.device, active_ ? "moves to" : "resumes on", label(i),
               ana_state_text(p.ana), why[0] ? fmt::format(": {}", why) : std::string());
  for (uint16_t q = 0; q < vol_.queues; ++q) queues_[q]->give_connection(std::move((*ios)[q]), static_cast<int>(i));
  active_ = i;
  paused_ = false;
  return true;
}

void Supervisor::service_paths() {
  for (std::size_t i = 0; i < paths_.size(); ++i) {
    Path& p = paths_[i];
    if (p.connection != PathConnection::live || !p.ctrl) continue;
    p.ctrl->service();
    if (p.ctrl->failed()) {
      path_lost(i, p.ctrl->failure());
      continue;
    }
    if (p.ctrl->take_ana_change()) p.ana_stale = true;
  }
  for (auto& q : queues_) {
    const int lp = q->take_lost();
    if (lp >= 0 && active_ && static_cast<std::size_t>(lp) == *active_ && paths_[*active_].ctrl) {
      path_lost(*active_, "an I/O queue failed");
    }
    if (q->take_path_error()) {
      paused_ = true;
      if (active_) paths_[*active_].ana_stale = true;
    }
  }
  const auto now = Clock::now();
  for (std::size_t i = 0; i < paths_.size(); ++i) {
    Path& p = paths_[i];
    if (p.connection != PathConnection::live || !p.ctrl) continue;
    // An unusable state is re-read each second as well: a notice may be missed, and a transition ends.
    const bool unusable = p.ana && !ana_usable(*p.ana);
    if (p.ana_stale || (unusable && now - p.ana_read >= std::chrono::seconds(1))) {
      if (auto r = read_ana(i); !r) {
        if (p.ctrl->failed()) {
          path_lost(i, r.error().message);
        } else {
          spdlog::warn("{}: path {}: reading the ANA log: {}", vol_.device, label(i), r.error().message);
        }
      }
    }
  }
}

void Supervisor::update_state(Clock::time_point now) {
  // A usable path exists (I/O is on it, or moves there in this turn): the loss timeout is for none.
  const bool usable = choose_path(statuses(), active_).has_value();
  if (!usable) {
    if (!no_path_since_) {
      no_path_since_ = now;
      if (paths_.size() > 1) {
        spdlog::warn("{}: no usable path: I/O is held{}", vol_.device,
                     o_.ctrl_loss_tmo.count() >= 0 ? fmt::format(" (up to {} s, then it fails)", o_.ctrl_loss_tmo.count())
                                                    : std::string());
      }
    }
    if (!failing_ && o_.ctrl_loss_tmo.count() >= 0 && now - *no_path_since_ >= o_.ctrl_loss_tmo) {
      spdlog::error("{}: {} unreachable for {} s (ctrl-loss-tmo): failing I/O until it is back", vol_.device,
                    paths_.size() == 1 ? vol_.where : "every path", o_.ctrl_loss_tmo.count());
      for (auto& q : queues_) q->set_fail_fast(true);
      failing_ = true;
    }
    state_ = failing_ ? "failed" : "reconnecting";
  } else {
    if (no_path_since_) {
      no_path_since_.reset();
      if (failing_) {
        for (auto& q : queues_) q->set_fail_fast(false);
        failing_ = false;
      }
    }
    state_ = "live";
  }
  publish(state_);
}

// Where I/O should go now: switch when another path is better, resume after a path error when the path
// in use is still the one to use.
void Supervisor::steer() {
  const auto want = choose_path(statuses(), active_);
  if (want && want != active_ && Clock::now() >= paths_[*want].switch_retry) {
    const char* why = !active_                                                   ? ""
                      : paths_[*active_].ana && !ana_usable(*paths_[*active_].ana) ? "the path in use is not usable"
                                                                                   : "a better path is back";
    (void)switch_to(*want, why);
  } else if (want && want == active_ && paused_) {
    for (auto& q : queues_) q->resume();  // e.g. a transition ended on the same path
    paused_ = false;
  }
}

void Supervisor::supervise(int stop_fd) {
  stop_fd_ = stop_fd;
  for (;;) {
    auto now = Clock::now();
    // Keep Alive goes out every KATO/2 from this loop; waking each KATO/4 keeps the gap between two
    // well under the KATO the target checks (it drops a controller silent for a whole KATO).
    int timeout_ms =
        o_.controller.kato_ms ? static_cast<int>(std::clamp<uint32_t>(o_.controller.kato_ms / 4, 100, 1000)) : 1000;
    for (const auto& p : paths_) {
      if (!p.policy.down() || p.connection == PathConnection::failed) continue;
      auto until = std::chrono::duration_cast<std::chrono::milliseconds>(p.policy.next_attempt() - now).count();
      timeout_ms = static_cast<int>(std::clamp<long long>(until, 0, timeout_ms));
    }
    pollfd fds[2] = {{stop_fd, POLLIN, 0}, {efd_, POLLIN, 0}};
    int rc = ::poll(fds, 2, timeout_ms);
    if (rc < 0 && errno != EINTR) {
      spdlog::error("poll: {}", std::strerror(errno));
      return;
    }
    if (rc > 0 && (fds[0].revents & POLLIN) != 0) {
      signalfd_siginfo si{};
      if (::read(stop_fd, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si)) && si.ssi_signo != 0) {
        spdlog::info("{}: {} received: detaching", vol_.device, strsignal(static_cast<int>(si.ssi_signo)));
      }
      return;
    }
    uint64_t v = 0;
    (void)!::read(efd_, &v, sizeof(v));
    if (any_finished()) {
      // Stopped from outside (STOP_DEV by another tool), or the driver refused a queue's commands: a
      // device with a dead queue would hang the I/O mapped to it. Remove it.
      spdlog::warn("{}: a queue ended (device stopped from outside?): removing the device", vol_.device);
      return;
    }
    service_paths();
    update_state(Clock::now());  // before reconnecting, which may take a connect timeout per path
    steer();  // first: a path lost just now must not wait for reconnect attempts (connect timeouts)
    // Paths that are down: reconnect when their backoff says so.
    now = Clock::now();
    for (std::size_t i = 0; i < paths_.size(); ++i) {
      Path& p = paths_[i];
      if (p.connection != PathConnection::connecting || !p.policy.due(now)) continue;
      auto r = bring_up_path(i, vol_.queues);
      keep_alive_all();  // a bring-up takes several round trips: the other paths' targets count KATO
      if (r) {
        spdlog::info("{}: reconnected to {}", vol_.device, paths_.size() == 1 ? p.ctrl->where() : label(i));
      } else if (p.connection == PathConnection::failed) {
        spdlog::error("{}: path {} refused: {}", vol_.device, label(i), r.error().message);
      } else {
        p.policy.attempt_failed(Clock::now());
        spdlog::warn("{}: reconnect{} failed: {}", vol_.device, paths_.size() == 1 ? "" : " to " + label(i),
                     r.error().message);
      }
    }
    steer();  // a path back may be better than the one in use
    update_state(Clock::now());
  }
}

void Supervisor::teardown() noexcept {
  if (torn_down_) return;
  torn_down_ = true;
  // STOP_DEV waits for every request (and writes back the disk's cache first) while this thread cannot
  // reconnect: a connection lost now, or already, must fail held I/O rather than hang the detach.
  // Live connections keep serving.
  for (auto& q : queues_) q->set_fail_fast(true);
  if (started_) {
    if (auto r = control_->stop(vol_.dev_id); !r) spdlog::error("{}: {}", vol_.device, r.error().message);
  }
  for (auto& q : queues_) q->finish();
  for (auto& t : threads_) t.join();
  threads_.clear();
  queues_.clear();
  if (cdev_fd_ >= 0) ::close(cdev_fd_);
  cdev_fd_ = -1;
  if (added_) {
    // DEL_DEV waits until nobody has the block device open (a mounted filesystem, say).
    spdlog::info("{}: removing the device (waits until it is no longer open)", vol_.device);
    if (auto r = control_->remove(vol_.dev_id); !r) spdlog::error("{}: {}", vol_.device, r.error().message);
  }
  for (auto& p : paths_) {
    if (p.ctrl) (void)p.ctrl->shutdown(std::chrono::milliseconds(2000));
    p.ctrl.reset();
  }
  if (efd_ >= 0) ::close(efd_);
  efd_ = -1;
}

}  // namespace

Result<void> serve_volume(const AttachOptions& opts, int stop_fd, const VolumeEvents& events) {
  Supervisor s(opts, events);
  if (auto r = s.attach(); !r) return r;  // the destructor undoes what was done
  s.supervise(stop_fd);
  return {};
}

}  // namespace rdmablk::initiator::ublk
