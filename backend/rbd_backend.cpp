// The `rbd` backend: a Ceph RBD image through librbd's C API (Debian 12: Ceph 16.2).
//
// Choices (behaviour the target relies on):
// - One cluster connection (rados_t) per (ceph_conf, client, keyring) in the process (backend/rados_cluster.h),
//   shared by every rbd namespace naming it; the image is opened once per backend (rbd_open) and every
//   reactor's Queue issues on that one handle. One handle per reactor would make an exclusive-lock image
//   bounce its lock between the handles on every write.
// - Connect with client_mount_timeout / rados_mon_op_timeout / rados_osd_op_timeout set (RbdOptions::
//   timeout_seconds, unless the conf or CEPH_ARGS sets them): an unreachable cluster fails the open
//   ("cannot reach the Ceph cluster: ..."), a stalled OSD completes the I/O with -ETIMEDOUT (Command
//   Interrupted, the host retries), never a hang.
// - Completions: rbd_aio_create_completion with a callback. The callback runs on librbd's finisher thread
//   and does only this: push the request's slot onto its queue's lock-free list and, when the list was
//   empty, write the queue's own eventfd (event_fd(), which the reactor polls). reap() drains the list
//   on the owning reactor. Chosen over rbd_set_image_notification because that eventfd and its
//   rbd_poll_io_events() list belong to the image, and the image is shared by every reactor's queue:
//   whichever reactor polled would take the others' completions and have to forward them. The callback
//   hands each completion straight to the queue that issued it.
// - Data moves straight from/into the request's buffer (rbd_aio_read/rbd_aio_write): no copy here.
// - Flush = rbd_aio_flush. FUA write = the write, then rbd_aio_flush, then the completion (when the rbd
//   cache is on; with it off a completed write is already committed by the OSDs, so FUA is the write).
// - Write Zeroes = rbd_aio_write_zeroes; Deallocate = rbd_aio_discard, with rbd_skip_partial_discard off
//   on our connection so that a discard zeroes exactly its range (deallocated blocks read as zeroes).
// - volatile_write_cache = the connection's rbd_cache setting (librbd's default: on).
// - Compare and Write = rbd_aio_compare_and_write: the OSD compares and writes atomically, so the pair is
//   atomic against every client of the image, other targets included; a mismatch (-EILSEQ) is Compare
//   Failure. A FUA one is followed by a flush like a FUA write. librbd takes one 512-byte sector at most:
//   namespaces with 512-byte blocks only, one block (what VMware's ATS and fencing heartbeats use).
// - Errors (negative errno from librbd) map through status_from_errno(err, op).
#include <poll.h>
#include <rados/librados.h>
#include <rbd/librbd.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/rados_cluster.h"
#include "backend/rados_object.h"
#include "backend/request_check.h"

namespace rdmablk::backend {

namespace {

namespace st = protocol::status;


// --- closing images off the I/O path -----------------------------------------------------------------

// Closing an image waits for the cluster (the cache's flush, the exclusive lock's release, the watch):
// milliseconds on a healthy cluster, seconds up to the op timeout on one that is gone. The last reference
// to a backend is often dropped on a reactor (a reload replaced its namespace table), which must not wait,
// so images are closed by this one thread, in order. wait_for_rbd_closes() lets shutdown wait for them;
// at exit the destructor finishes what is queued.
class ImageCloser {
 public:
  static ImageCloser& instance() {
    static ImageCloser closer;
    return closer;
  }
  void add(std::function<void()> job) {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) {
      // The first close may come before the daemon blocks its signals (the config check opens and drops
      // images): see AsyncSignalsBlocked.
      AsyncSignalsBlocked blocked;
      thread_ = std::thread([this] { run(); });
    }
    jobs_.push_back(std::move(job));
    ++pending_;
    cv_.notify_all();
  }
  bool wait_idle(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [this] { return pending_ == 0; });
  }
  ~ImageCloser() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();  // may drop the last reference to the cluster connection: rados_shutdown here too
      lock.lock();
      --pending_;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::size_t pending_ = 0;  // queued or running
  bool stop_ = false;
  std::thread thread_;
};

// --- backend and queue ----------------------------------------------------------------------------

class RbdBackend;
class RbdQueue;

struct Slot {
  RbdQueue* queue = nullptr;
  rbd_completion_t completion = nullptr;
  Slot* next = nullptr;          // the queue's done list (callback -> reactor) or free list (reactor)
  ssize_t result = 0;            // rbd_aio_get_return_value, set by the callback
  uint64_t user_data = 0;
  Op op = Op::read;
  bool flush_after = false;      // FUA write: a flush follows before the completion
  uint64_t mismatch_offset = 0;  // compare and write: where the data differed (librbd writes it)
};

void on_complete(rbd_completion_t c, void* arg) noexcept;

// A RADOS object in the image's pool and RADOS namespace, with an ioctx of its own (it may outlive the
// backend that made it). write_full and remove are atomic in the OSD.
class RadosSideObject final : public SideObject {
 public:
  // `io` for the plain operations, `versioned_io` for versioned() (each owned by what uses it).
  RadosSideObject(std::shared_ptr<RadosCluster> cluster, rados_ioctx_t io, rados_ioctx_t versioned_io, std::string oid,
                  std::string where)
      : cluster_(cluster),
        io_(io),
        oid_(std::move(oid)),
        where_(std::move(where)),
        versioned_(std::move(cluster), versioned_io, oid_, "rados object", where_ + "/" + oid_) {}
  ~RadosSideObject() override { rados_ioctx_destroy(io_); }

  Result<std::optional<std::vector<uint8_t>>> read() override {
    AsyncSignalsBlocked blocked;
    uint64_t size = 0;
    time_t mtime = 0;
    int rc = rados_stat(io_, oid_.c_str(), &size, &mtime);
    if (rc == -ENOENT) return std::optional<std::vector<uint8_t>>{};
    if (rc < 0) return make_error(fmt::format("{}: stat: {}", describe(), rados_errstr(rc)), -rc);
    std::vector<uint8_t> bytes(size);
    rc = size == 0 ? 0 : rados_read(io_, oid_.c_str(), reinterpret_cast<char*>(bytes.data()), size, 0);
    if (rc < 0) return make_error(fmt::format("{}: read: {}", describe(), rados_errstr(rc)), -rc);
    bytes.resize(static_cast<std::size_t>(rc));
    return std::optional<std::vector<uint8_t>>{std::move(bytes)};
  }
  Result<void> write(std::span<const uint8_t> bytes) override {
    AsyncSignalsBlocked blocked;
    const int rc = rados_write_full(io_, oid_.c_str(), reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (rc < 0) return make_error(fmt::format("{}: write: {}", describe(), rados_errstr(rc)), -rc);
    return {};
  }
  Result<void> remove() override {
    AsyncSignalsBlocked blocked;
    const int rc = rados_remove(io_, oid_.c_str());
    if (rc < 0 && rc != -ENOENT) return make_error(fmt::format("{}: remove: {}", describe(), rados_errstr(rc)), -rc);
    return {};
  }
  std::string describe() const override { return fmt::format("rados object {}/{}", where_, oid_); }
  RadosObject* versioned() override { return &versioned_; }

 private:
  std::shared_ptr<RadosCluster> cluster_;  // the connection outlives the ioctx
  rados_ioctx_t io_;
  std::string oid_;
  std::string where_;  // pool[/namespace]
  RadosObject versioned_;
};

class RbdBackend final : public Backend {
 public:
  RbdBackend(std::shared_ptr<RadosCluster> cluster, rados_ioctx_t io, rbd_image_t image, const Geometry& geo,
             std::string name, const RbdOptions& where)
      : cluster_(std::move(cluster)), io_(io), image_(image), geo_(geo), name_(std::move(name)),
        pool_(where.pool), rados_namespace_(where.rados_namespace), image_name_(where.image), blocks_(geo.num_blocks) {}
  // The close waits for the cluster, so it happens on the closer thread (see ImageCloser); the queues are
  // gone by now (each waited for its own requests).
  ~RbdBackend() override {
    // The update callback's target goes with the closer, not with this object: librbd may call it until
    // the unwatch there returns.
    ImageCloser::instance().add([cluster = cluster_, io = io_, image = image_, watching = watching_,
                                 handle = watch_handle_, name = name_, sink = update_sink_] {
      if (watching) rbd_update_unwatch(image, handle);  // waits for a callback in progress
      const int rc = rbd_close(image);  // flushes the rbd cache, releases the exclusive lock
      if (rc < 0) spdlog::warn("{}: close: {}", name, rados_errstr(rc));
      rados_ioctx_destroy(io);
    });
  }

  const Geometry& geometry() const noexcept override { return geo_; }
  std::string describe() const override { return name_; }
  Result<std::unique_ptr<Queue>> open_queue(const QueueOptions& opts) const override;

  // rbd_get_size refreshes the image header first when a watch notification said it changed (someone ran
  // `rbd resize`). A size that is not a multiple of the block size serves its whole blocks.
  Result<uint64_t> refresh_size() const override {
    uint64_t bytes = 0;
    if (const int rc = rbd_get_size(image_, &bytes); rc < 0)
      return make_error(fmt::format("{}: cannot read the image size: {}", name_, rados_errstr(rc)), -rc);
    const uint64_t blocks = bytes / geo_.block_size;
    if (blocks == 0) return make_error(fmt::format("{}: the image now has {} bytes, less than one block", name_, bytes), EINVAL);
    blocks_.store(blocks, std::memory_order_relaxed);
    return blocks;
  }
  uint64_t num_blocks() const noexcept override { return blocks_.load(std::memory_order_relaxed); }

  // librbd calls back on every header update (resize, snapshots, metadata, lock owner): the owner refreshes
  // and compares.
  void watch_size(std::function<void()> notify) const override {
    if (watching_) return;
    update_sink_ = std::make_shared<std::function<void()>>(std::move(notify));
    const int rc = rbd_update_watch(image_, &watch_handle_, &RbdBackend::on_update, update_sink_.get());
    if (rc < 0) {
      spdlog::warn("{}: cannot watch the image for resizes ({}): a reload re-reads its size", name_, rados_errstr(rc));
      return;
    }
    watching_ = true;
  }

  // "rdmablk.NAME.IMAGE" next to the image: every target exporting the image finds the same object.
  std::unique_ptr<SideObject> side_object(std::string_view name) const override {
    rados_ioctx_t io = nullptr, versioned_io = nullptr;
    if (rados_ioctx_create(cluster_->handle(), pool_.c_str(), &io) < 0) return nullptr;
    if (rados_ioctx_create(cluster_->handle(), pool_.c_str(), &versioned_io) < 0) {
      rados_ioctx_destroy(io);
      return nullptr;
    }
    if (!rados_namespace_.empty()) {
      rados_ioctx_set_namespace(io, rados_namespace_.c_str());
      rados_ioctx_set_namespace(versioned_io, rados_namespace_.c_str());
    }
    const std::string where = rados_namespace_.empty() ? pool_ : pool_ + "/" + rados_namespace_;
    return std::make_unique<RadosSideObject>(cluster_, io, versioned_io, fmt::format("rdmablk.{}.{}", name, image_name_),
                                             where);
  }

  rbd_image_t image() const noexcept { return image_; }
  bool flush_for_fua() const noexcept { return geo_.caps.volatile_write_cache; }

 private:
  std::shared_ptr<RadosCluster> cluster_;
  rados_ioctx_t io_;
  rbd_image_t image_;
  Geometry geo_;
  std::string name_;
  std::string pool_, rados_namespace_, image_name_;
  mutable std::atomic<uint64_t> blocks_;
  // What on_update calls: set before the watch starts, then only read by it; shared with the closer.
  mutable std::shared_ptr<std::function<void()>> update_sink_;
  mutable uint64_t watch_handle_ = 0;
  mutable bool watching_ = false;

  static void on_update(void* arg) noexcept {
    const auto* notify = static_cast<const std::function<void()>*>(arg);
    if (*notify) (*notify)();
  }
};

class RbdQueue final : public Queue {
 public:
  RbdQueue(const RbdBackend& backend, unsigned depth, int efd)
      : backend_(backend), slots_(depth), event_fd_(efd) {
    for (auto& s : slots_) {
      s.queue = this;
      s.next = free_;
      free_ = &s;
    }
  }
  ~RbdQueue() override {
    // librbd's callbacks point into this queue: wait until every request has come back and the last
    // callback has left (it writes the eventfd after publishing the slot).
    std::vector<Completion> sink(64);
    while (in_flight_ > 0) {
      pollfd p{event_fd_, POLLIN, 0};
      ::poll(&p, 1, 100);
      clear_event();
      reap(sink, 0);
    }
    while (callbacks_running_.load(std::memory_order_acquire) != 0) ::usleep(100);
    ::close(event_fd_);
  }

  Status submit(const Request& req) noexcept override {
    const Status s = detail::check_request(req, backend_.geometry(), backend_.num_blocks());
    if (!s.ok()) return s;
    if (free_ == nullptr) return queue_full;
    Slot* slot = free_;
    free_ = slot->next;
    slot->next = nullptr;
    slot->user_data = req.user_data;
    slot->op = req.op;
    slot->flush_after = (req.op == Op::write || req.op == Op::compare_and_write) && req.fua && backend_.flush_for_fua();
    ++in_flight_;
    const uint64_t bs = backend_.geometry().block_size;
    const int rc = issue(*slot, req.op, req.slba * bs, uint64_t{req.nlb} * bs, static_cast<char*>(req.buf),
                         static_cast<const char*>(req.cmp_buf));
    if (rc < 0) complete_locally(*slot, rc);
    return st::success;
  }

  int flush() noexcept override { return 0; }  // librbd sends at submit

  unsigned reap(std::span<Completion> out, unsigned min_complete) noexcept override {
    unsigned n = 0;
    for (;;) {
      n += drain(out.subspan(n));
      if (n >= min_complete || n == out.size() || in_flight_ == 0) return n;
      pollfd p{event_fd_, POLLIN, 0};
      ::poll(&p, 1, -1);
      clear_event();
    }
  }

  unsigned in_flight() const noexcept override { return in_flight_; }
  int event_fd() const noexcept override { return event_fd_; }
  void clear_event() noexcept override {
    uint64_t v;
    [[maybe_unused]] auto r = ::read(event_fd_, &v, sizeof v);
  }

  // librbd's finisher thread.
  void publish(Slot& slot) noexcept {
    Slot* head = done_.load(std::memory_order_relaxed);
    do {
      slot.next = head;
    } while (!done_.compare_exchange_weak(head, &slot, std::memory_order_release, std::memory_order_relaxed));
    if (head == nullptr) {
      const uint64_t one = 1;
      [[maybe_unused]] auto r = ::write(event_fd_, &one, sizeof one);
    }
  }
  std::atomic<unsigned> callbacks_running_{0};

 private:
  int issue(Slot& slot, Op op, uint64_t off, uint64_t len, char* buf, const char* cmp = nullptr) noexcept {
    int rc = rbd_aio_create_completion(&slot, on_complete, &slot.completion);
    if (rc < 0) {
      slot.completion = nullptr;
      return rc;
    }
    rbd_image_t img = backend_.image();
    switch (op) {
      case Op::read:
        rc = rbd_aio_read(img, off, len, buf, slot.completion);
        break;
      case Op::write:
        rc = rbd_aio_write(img, off, len, buf, slot.completion);
        break;
      case Op::flush:
        rc = rbd_aio_flush(img, slot.completion);
        break;
      case Op::write_zeroes:
        rc = rbd_aio_write_zeroes(img, off, len, slot.completion, 0, 0);
        break;
      case Op::deallocate:
        rc = rbd_aio_discard(img, off, len, slot.completion);
        break;
      case Op::compare_and_write:
        rc = static_cast<int>(rbd_aio_compare_and_write(img, off, len, cmp, buf, slot.completion, &slot.mismatch_offset, 0));
        break;
    }
    if (rc < 0) {
      rbd_aio_release(slot.completion);
      slot.completion = nullptr;
    }
    return rc;
  }

  // A request librbd refused at once: complete it through the same list (and eventfd) as the others.
  void complete_locally(Slot& slot, int rc) noexcept {
    slot.result = rc;
    slot.flush_after = false;
    publish(slot);
  }

  // Takes the done list (oldest first) and turns it into completions; FUA writes go on to their flush.
  unsigned drain(std::span<Completion> out) noexcept {
    if (pending_ == nullptr) {
      Slot* list = done_.exchange(nullptr, std::memory_order_acquire);
      Slot* rev = nullptr;  // the list is newest first
      while (list != nullptr) {
        Slot* next = list->next;
        list->next = rev;
        rev = list;
        list = next;
      }
      pending_ = rev;
    }
    unsigned n = 0;
    while (pending_ != nullptr && n < out.size()) {
      Slot* s = pending_;
      pending_ = s->next;
      if (s->completion != nullptr) {
        rbd_aio_release(s->completion);
        s->completion = nullptr;
      }
      if (s->result >= 0 && s->flush_after) {
        s->flush_after = false;
        const int rc = issue(*s, Op::flush, 0, 0, nullptr);
        if (rc < 0) complete_locally(*s, rc);
        continue;
      }
      const Op op = s->flush_after ? Op::write : s->op;
      Status status = s->result >= 0 ? Status(st::success) : status_from_errno(static_cast<int>(s->result), op);
      if (s->op == Op::compare_and_write && s->result == -EILSEQ) status = st::compare_failure;
      out[n++] = Completion{s->user_data, status};
      s->next = free_;
      free_ = s;
      --in_flight_;
    }
    return n;
  }

  const RbdBackend& backend_;
  std::vector<Slot> slots_;
  Slot* free_ = nullptr;     // reactor only
  Slot* pending_ = nullptr;  // taken from done_, not yet handed out (reactor only)
  std::atomic<Slot*> done_{nullptr};
  unsigned in_flight_ = 0;
  int event_fd_;
};

void on_complete(rbd_completion_t c, void* arg) noexcept {
  Slot& slot = *static_cast<Slot*>(arg);
  RbdQueue& q = *slot.queue;
  q.callbacks_running_.fetch_add(1, std::memory_order_relaxed);
  slot.result = rbd_aio_get_return_value(c);
  q.publish(slot);
  q.callbacks_running_.fetch_sub(1, std::memory_order_release);
}

Result<std::unique_ptr<Queue>> RbdBackend::open_queue(const QueueOptions& opts) const {
  if (opts.depth == 0) return make_error("queue depth must be at least 1", EINVAL);
  const int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) return make_error(fmt::format("{}: eventfd: {}", name_, rados_errstr(errno)), errno);
  return std::unique_ptr<Queue>(std::make_unique<RbdQueue>(*this, opts.depth, efd));
}

}  // namespace

Result<std::unique_ptr<Backend>> open_rbd_backend(const RbdOptions& o) {
  AsyncSignalsBlocked blocked;  // librados and librbd start their threads in here
  if (o.pool.empty()) return make_error("rbd backend: pool is required", EINVAL);
  if (o.image.empty()) return make_error("rbd backend: image is required", EINVAL);
  if (!detail::valid_block_size(o.block_size))
    return make_error(fmt::format("rbd backend: block size {} is not a power of two in [512, 65536]", o.block_size),
                      EINVAL);
  const std::string where = o.rados_namespace.empty()
                                ? fmt::format("{}/{}", o.pool, o.image)
                                : fmt::format("{}/{}/{}", o.pool, o.rados_namespace, o.image);
  auto cluster = shared_rados_cluster(RadosOptions{o.ceph_conf, o.client, o.keyring, o.timeout_seconds});
  if (!cluster) return make_error(fmt::format("rbd {}: {}", where, cluster.error().message), cluster.error().errno_value);

  rados_ioctx_t io = nullptr;
  int rc = rados_ioctx_create((*cluster)->handle(), o.pool.c_str(), &io);
  if (rc < 0) return make_error(fmt::format("rbd {}: cannot open pool {}: {}", where, o.pool, rados_errstr(rc)), -rc);
  if (!o.rados_namespace.empty()) rados_ioctx_set_namespace(io, o.rados_namespace.c_str());
  rbd_image_t image = nullptr;
  rc = o.read_only ? rbd_open_read_only(io, o.image.c_str(), &image, nullptr)
                   : rbd_open(io, o.image.c_str(), &image, nullptr);
  if (rc < 0) {
    rados_ioctx_destroy(io);
    return make_error(fmt::format("rbd {}: cannot open the image: {}", where, rados_errstr(rc)), -rc);
  }
  uint64_t bytes = 0;
  rc = rbd_get_size(image, &bytes);
  auto fail = [&](std::string msg, int err) {
    rbd_close(image);
    rados_ioctx_destroy(io);
    return make_error(fmt::format("rbd {}: {}", where, msg), err);
  };
  if (rc < 0) return fail(fmt::format("cannot read the image size: {}", rados_errstr(rc)), -rc);
  if (bytes == 0) return fail("the image is empty", EINVAL);
  if (bytes % o.block_size != 0)
    return fail(fmt::format("the image size {} is not a multiple of the block size {}", bytes, o.block_size), EINVAL);

  Geometry geo;
  geo.block_size = o.block_size;
  geo.num_blocks = bytes / o.block_size;
  geo.buf_alignment = 1;
  geo.caps.flush = true;
  geo.caps.fua = true;
  geo.caps.write_zeroes = true;
  geo.caps.deallocate = true;
  geo.caps.deallocated_reads_zeroes = true;  // rbd_skip_partial_discard = false (connect_cluster)
  geo.caps.volatile_write_cache = (*cluster)->rbd_cache();
  geo.caps.read_only = o.read_only;
  // librbd (16) compares and writes within one 512-byte sector only (ImageCompareAndWriteRequest).
  geo.caps.compare_and_write_blocks = !o.read_only && geo.block_size == 512 ? 1 : 0;
  std::string name = fmt::format("rbd {} (client {})", where, o.client);
  spdlog::debug("{}: {} bytes, block size {}, rbd cache {}", name, bytes, o.block_size,
                (*cluster)->rbd_cache() ? "on" : "off");
  return std::unique_ptr<Backend>(std::make_unique<RbdBackend>(std::move(*cluster), io, image, geo, std::move(name), o));
}

bool wait_for_rbd_closes(std::chrono::milliseconds limit) { return ImageCloser::instance().wait_idle(limit); }

}  // namespace rdmablk::backend
