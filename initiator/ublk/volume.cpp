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

// The supervisor of one attachment (see volume.h). Owns the Controller; queue threads own the IoQueues
// made from it, so the Controller is destroyed only once every queue has let go of its connection.
class Supervisor {
 public:
  Supervisor(const AttachOptions& o, const VolumeEvents& ev)
      : o_(o), ev_(ev), policy_(o.ctrl_loss_tmo, o.reconnect_delay) {}
  ~Supervisor() { teardown(); }

  Result<void> attach();
  void supervise(int stop_fd);

 private:
  Result<std::unique_ptr<Controller>> connect_controller(uint16_t want_queues);
  Result<std::vector<std::unique_ptr<IoQueue>>> connect_io_queues(Controller& ctrl, uint16_t count);
  Result<void> reconnect();
  void begin_reconnect(const std::string& why);
  bool wait_queues_released();  // false: a queue still holds an IoQueue after 30 s
  bool any_finished() const;
  bool stop_requested() const {
    pollfd p{stop_fd_, POLLIN, 0};
    return stop_fd_ >= 0 && ::poll(&p, 1, 0) > 0;
  }
  void set_state(std::string_view s) {
    if (ev_.state) ev_.state(vol_, s);
  }
  void teardown() noexcept;

  AttachOptions o_;
  VolumeEvents ev_;
  ReconnectPolicy policy_;
  AttachedVolume vol_;
  std::unique_ptr<Control> control_;
  std::unique_ptr<Controller> ctrl_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<std::thread> threads_;
  int efd_ = -1;
  int cdev_fd_ = -1;
  bool added_ = false;
  bool started_ = false;
  bool failing_ = false;
  int stop_fd_ = -1;
  NamespaceInfo ns_at_attach_;
  bool torn_down_ = false;
};

Result<std::unique_ptr<Controller>> Supervisor::connect_controller(uint16_t want_queues) {
  ControllerOptions co = o_.controller;
  co.io_queues = want_queues;
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

Result<void> Supervisor::attach() {
  // ublk first: where it is missing, say so before touching the network.
  auto control = Control::open(o_.control_path);
  if (!control) return tl::unexpected(control.error());
  control_ = std::move(*control);
  efd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd_ < 0) return make_error(fmt::format("eventfd: {}", std::strerror(errno)), errno);

  uint16_t want = o_.io_queues;
  if (want == 0) want = static_cast<uint16_t>(std::clamp(std::thread::hardware_concurrency(), 1u, 64u));
  auto ctrl = connect_controller(want);
  if (!ctrl) return tl::unexpected(ctrl.error());
  ctrl_ = std::move(*ctrl);
  const NamespaceInfo& ns = *ctrl_->find_namespace(o_.nsid);
  ns_at_attach_ = ns;
  auto geometry = geometry_for(ctrl_->identity(), ns, ctrl_->max_transfer_bytes());
  if (!geometry) return make_error(ctrl_->where() + ": " + geometry.error().message, EINVAL);
  const auto nr = std::min<uint16_t>(want, ctrl_->granted_io_queues());
  if (nr == 0) return make_error(ctrl_->where() + ": the controller granted no I/O queue", EIO);
  auto ios = connect_io_queues(*ctrl_, nr);
  if (!ios) return tl::unexpected(ios.error());
  // As the Linux host sizes its tag sets: one entry fewer than the queue has (SQSIZE is 0-based).
  const uint16_t entries = std::min((*ios)[0]->queue().entries(), o_.queue_size);
  const uint16_t depth = std::min<uint16_t>(std::max<uint16_t>(entries, 2) - 1, kMaxQueueDepth);

  vol_.where = ctrl_->where();

  ublksrv_ctrl_dev_info want_info{};
  want_info.nr_hw_queues = nr;
  want_info.queue_depth = depth;
  want_info.max_io_buf_bytes = geometry->max_io_bytes;
  want_info.dev_id = UINT32_MAX;
  want_info.flags = control_->io_flags();
  auto info = control_->add_device(want_info);
  if (!info) return tl::unexpected(info.error());
  added_ = true;
  vol_.dev_id = info->dev_id;
  vol_.device = block_device_path(info->dev_id);
  // The driver may grant less than asked: queues (at most one per CPU), depth, buffer size (pages).
  if (info->nr_hw_queues == 0 || info->nr_hw_queues > nr || info->queue_depth == 0 || info->queue_depth > depth ||
      info->max_io_buf_bytes < geometry->block_size || info->max_io_buf_bytes > geometry->max_io_bytes) {
    return make_error(fmt::format("ublk ADD_DEV granted {} queue(s) x {}, {} byte buffers for {} x {}, {} bytes",
                                  info->nr_hw_queues, info->queue_depth, info->max_io_buf_bytes, nr, depth,
                                  geometry->max_io_bytes),
                      EINVAL);
  }
  if (info->nr_hw_queues < nr) {
    spdlog::info("{}: the driver grants {} queue(s) of the {} asked for", vol_.device, info->nr_hw_queues, nr);
  }
  ios->resize(info->nr_hw_queues);  // the surplus I/O queues disconnect here
  vol_.queues = info->nr_hw_queues;
  vol_.depth = info->queue_depth;
  geometry->max_io_bytes = info->max_io_buf_bytes;
  vol_.geometry = *geometry;
  if (auto r = control_->set_params(vol_.dev_id, params_for(*geometry)); !r) return r;

  // devtmpfs creates the node with the device; udev may still be renaming permissions: retry briefly.
  const std::string cdev = char_device_path(vol_.dev_id);
  for (int i = 0; i < 100; ++i) {
    cdev_fd_ = ::open(cdev.c_str(), O_RDWR | O_CLOEXEC);
    if (cdev_fd_ >= 0 || errno != ENOENT) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (cdev_fd_ < 0) return make_error(fmt::format("cannot open {}: {}", cdev, std::strerror(errno)), errno);

  for (uint16_t q = 0; q < vol_.queues; ++q) {
    QueueConfig qc;
    qc.dev_id = vol_.dev_id;
    qc.q_id = q;
    qc.depth = vol_.depth;
    qc.cdev_fd = cdev_fd_;
    qc.ioctl_encoded = control_->ioctl_encoded();
    qc.nsid = o_.nsid;
    qc.geometry = *geometry;
    auto queue = Queue::create(qc, efd_);
    if (!queue) return tl::unexpected(queue.error());
    (*queue)->give_connection(std::move((*ios)[q]));
    queues_.push_back(std::move(*queue));
  }
  for (auto& q : queues_) threads_.emplace_back([p = q.get()] { p->run(); });
  // START_DEV adds the disk, which reads the partition table through the queues while this thread
  // waits: nobody could reconnect meanwhile, so a connection lost now fails those reads, not hangs them.
  for (auto& q : queues_) q->set_fail_fast(true);
  if (auto r = control_->start(vol_.dev_id, ::getpid()); !r) return r;
  started_ = true;
  for (auto& q : queues_) q->set_fail_fast(false);
  spdlog::info("{}: namespace {} attached as {} ({} bytes, {}-byte blocks, {} queue(s) x {}, max I/O {} KiB{}{}{})",
               vol_.where, o_.nsid, vol_.device, geometry->size_bytes, geometry->block_size, vol_.queues, vol_.depth,
               geometry->max_io_bytes / 1024, geometry->volatile_cache ? ", flush" : "",
               geometry->discard ? ", discard" : "", geometry->write_zeroes ? ", write zeroes" : "");
  if (ev_.ready) ev_.ready(vol_);
  set_state("live");
  return {};
}

bool Supervisor::any_finished() const {
  return std::any_of(queues_.begin(), queues_.end(), [](const auto& q) { return q->finished(); });
}

bool Supervisor::wait_queues_released() {
  // The queue threads answer their mailbox within one loop turn; a stuck one would hang the
  // reconnection, so this is bounded and loud.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (std::any_of(queues_.begin(), queues_.end(), [](const auto& q) { return q->has_connection() && !q->finished(); })) {
    if (Clock::now() > deadline) {
      spdlog::error("{}: a ublk queue did not release its connection in 30 s", vol_.device);
      return false;
    }
    pollfd p{efd_, POLLIN, 0};
    (void)::poll(&p, 1, 100);
    uint64_t v = 0;
    (void)!::read(efd_, &v, sizeof(v));
  }
  return true;
}

void Supervisor::begin_reconnect(const std::string& why) {
  spdlog::warn("{}: connection to {} lost ({}); I/O is held while reconnecting{}", vol_.device, vol_.where, why,
               o_.ctrl_loss_tmo.count() >= 0 ? fmt::format(" (up to {} s, then it fails)", o_.ctrl_loss_tmo.count())
                                              : std::string());
  for (auto& q : queues_) q->drop_connection();
  if (!wait_queues_released()) {
    (void)ctrl_.release();  // a queue may still use it: leaking it is the safe choice
  }
  ctrl_.reset();
  policy_.lost(Clock::now());
  set_state("reconnecting");
}

Result<void> Supervisor::reconnect() {
  auto ctrl = connect_controller(vol_.queues);
  if (!ctrl) return tl::unexpected(ctrl.error());
  const NamespaceInfo& ns = *(*ctrl)->find_namespace(o_.nsid);
  if (ns.block_size != vol_.geometry.block_size) {
    return make_error(fmt::format("namespace {} now has {}-byte blocks, the device {}", o_.nsid, ns.block_size,
                                  vol_.geometry.block_size),
                      EINVAL);
  }
  const NamespaceInfo& before = ns_at_attach_;
  if (ns.nguid != before.nguid || ns.eui64 != before.eui64 || ns.uuid != before.uuid) {
    return make_error(fmt::format("namespace {} has other identifiers (NGUID/EUI64/UUID) than when it was "
                                  "attached: not the same volume",
                                  o_.nsid),
                      EINVAL);
  }
  const uint32_t limit = (*ctrl)->max_transfer_bytes();
  if (limit != 0 && limit < vol_.geometry.max_io_bytes) {
    return make_error(fmt::format("the controller now takes at most {} bytes per command, the device sends up to {}",
                                  limit, vol_.geometry.max_io_bytes),
                      EINVAL);
  }
  if (ns.size_blocks * ns.block_size != vol_.geometry.size_bytes) {
    spdlog::warn("{}: namespace {} changed size ({} -> {} bytes); the device keeps its size", vol_.device, o_.nsid,
                 vol_.geometry.size_bytes, ns.size_blocks * ns.block_size);
  }
  auto ios = connect_io_queues(**ctrl, vol_.queues);
  if (!ios) return tl::unexpected(ios.error());
  ctrl_ = std::move(*ctrl);
  for (uint16_t q = 0; q < vol_.queues; ++q) queues_[q]->give_connection(std::move((*ios)[q]));
  return {};
}

void Supervisor::supervise(int stop_fd) {
  stop_fd_ = stop_fd;
  for (;;) {
    auto now = Clock::now();
    int timeout_ms = 1000;  // keep-alive granularity (KATO is seconds)
    if (policy_.down()) {
      auto until = std::chrono::duration_cast<std::chrono::milliseconds>(policy_.next_attempt() - now).count();
      timeout_ms = static_cast<int>(std::clamp<long long>(until, 0, 1000));
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
    now = Clock::now();
    if (!policy_.down()) {
      ctrl_->service();
      std::string why;
      if (ctrl_->failed()) why = ctrl_->failure();
      for (const auto& q : queues_) {
        if (why.empty() && q->lost()) why = "an I/O queue failed";
      }
      if (!why.empty()) begin_reconnect(why);
    }
    if (!policy_.down()) continue;
    now = Clock::now();
    if (!failing_ && policy_.expired(now)) {
      spdlog::error("{}: {} unreachable for {} s (ctrl-loss-tmo): failing I/O until it is back", vol_.device,
                    vol_.where, o_.ctrl_loss_tmo.count());
      for (auto& q : queues_) q->set_fail_fast(true);
      failing_ = true;
      set_state("failed");
    }
    if (policy_.due(now)) {
      if (auto r = reconnect(); r) {
        policy_.reconnected();
        if (failing_) {
          for (auto& q : queues_) q->set_fail_fast(false);
          failing_ = false;
        }
        spdlog::info("{}: reconnected to {}", vol_.device, vol_.where);
        set_state("live");
      } else {
        policy_.attempt_failed(Clock::now());
        spdlog::warn("{}: reconnect failed: {}", vol_.device, r.error().message);
      }
    }
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
  if (ctrl_) (void)ctrl_->shutdown(std::chrono::milliseconds(2000));
  ctrl_.reset();
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
