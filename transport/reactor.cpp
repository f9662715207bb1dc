#include "transport/reactor.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <queue>
#include <thread>
#include <unordered_map>
#include <utility>

#include <spdlog/spdlog.h>

namespace rdmablk::transport {

namespace {

using Clock = std::chrono::steady_clock;

// Ring setups tried in order (first that the kernel accepts wins):
//  - SINGLE_ISSUER (6.0): only the reactor thread submits; lets the kernel skip locking. The ring is
//    created R_DISABLED and enabled by the first thread that runs the loop, so create() may be called on
//    another thread (the kernel binds the issuer when the ring is enabled).
//  - COOP_TASKRUN + TASKRUN_FLAG (5.19): no IPI per completion; the loop enters the kernel when
//    IORING_SQ_TASKRUN says task work waits.
//  - SUBMIT_ALL (5.18): a failing SQE does not stop the rest of the batch.
constexpr std::array<unsigned, 4> kSetupFlags = {
    IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED | IORING_SETUP_COOP_TASKRUN |
        IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SUBMIT_ALL,
    IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SUBMIT_ALL,
    IORING_SETUP_SUBMIT_ALL,
    0,
};

constexpr unsigned kReapBatch = 256;

struct Timer {
  Clock::time_point deadline;
  uint64_t id;
  friend bool operator>(const Timer& a, const Timer& b) noexcept { return a.deadline > b.deadline; }
};

}  // namespace

struct Reactor::Impl {
  io_uring ring{};
  bool ring_ready = false;
  bool ring_disabled = false;  // created R_DISABLED, not yet enabled
  unsigned setup_flags = 0;
  ReactorOptions opts;

  // Cross-thread messages: a locked vector (control path) + an eventfd read through the ring.
  int event_fd = -1;
  struct EventOp {
    IoOp op;
    Impl* self;
  } event_op{};
  uint64_t event_value = 0;
  bool event_armed = false;
  std::mutex post_mu;
  std::vector<std::function<void()>> posted;
  std::vector<std::function<void()>> running;  // swapped with `posted` while draining
  std::atomic<bool> has_posted{false};
  std::atomic<bool> stop_requested{false};
  std::atomic<std::thread::id> owner{};

  std::vector<Poller*> pollers;
  bool pollers_dirty = false;

  // Busy time: the turns that did work, from the clock read each turn takes anyway (single writer).
  std::atomic<uint64_t> busy_ns{0};
  uint64_t turn_ns = 0;  // steady clock at the start of the current turn (reactor thread only)
  Clock::time_point last_turn{};
  bool last_turn_worked = false;
  Clock::time_point created = Clock::now();

  // watch_fd(): one record per watched op, alive until its poll's last CQE.
  struct FdWatch {
    IoOp op;  // the poll SQE's user_data
    Impl* self = nullptr;
    int fd = -1;
    IoOp* user = nullptr;  // null once unwatched
    bool armed = false;    // a poll is in the kernel (a CQE will come)
    bool in_callback = false;
  };
  std::unordered_map<IoOp*, std::unique_ptr<FdWatch>> watches;  // by user op
  std::vector<std::unique_ptr<FdWatch>> dying;                  // unwatched, poll still armed
  bool multishot_poll = true;  // cleared when the kernel refuses IORING_POLL_ADD_MULTI (< 5.13)

  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers;
  std::unordered_map<uint64_t, std::function<void()>> timer_fns;
  std::atomic<uint64_t> next_timer_id{1};

  Clock::time_point last_work = Clock::now();

  ~Impl() {
    if (ring_ready) io_uring_queue_exit(&ring);
    if (event_fd >= 0) ::close(event_fd);
  }

  static void on_event(IoOp* op, int res, uint32_t /*flags*/) noexcept {
    Impl* self = reinterpret_cast<EventOp*>(op)->self;
    self->event_armed = false;
    if (res < 0 && res != -EAGAIN && res != -EINTR && res != -ECANCELED) {
      spdlog::warn("reactor {}: eventfd read failed: {}", self->opts.name, std::strerror(-res));
    }
    self->arm_event();
  }

  void arm_watch(FdWatch& w) noexcept {
    io_uring_sqe* s = get_sqe();
    if (multishot_poll) {
      io_uring_prep_poll_multishot(s, w.fd, POLLIN);
    } else {
      io_uring_prep_poll_add(s, w.fd, POLLIN);
    }
    io_uring_sqe_set_data(s, &w.op);
    w.armed = true;
  }

  void free_dying(FdWatch* w) noexcept {
    std::erase_if(dying, [w](const std::unique_ptr<FdWatch>& d) { return d.get() == w; });
  }

  static void on_watch(IoOp* op, int res, uint32_t flags) noexcept {
    auto* w = reinterpret_cast<FdWatch*>(op);
    Impl* self = w->self;
    if ((flags & IORING_CQE_F_MORE) == 0) w->armed = false;
    if (w->user == nullptr) {  // unwatched: this was its last CQE, or the removal's -ECANCELED is still to come
      if (!w->armed) self->free_dying(w);
      return;
    }
    if (res == -EINVAL && self->multishot_poll && !w->armed) {
      self->multishot_poll = false;  // an old kernel: single shot from now on
      self->arm_watch(*w);
      return;
    }
    if (res == -ECANCELED || res == -EINTR) {  // not a readiness: just re-arm
      if (!w->armed) self->arm_watch(*w);
      return;
    }
    if (res < 0) spdlog::warn("reactor {}: poll on fd {} failed: {}", self->opts.name, w->fd, std::strerror(-res));
    w->in_callback = true;
    w->user->fn(w->user, res, 0);
    w->in_callback = false;
    if (w->user == nullptr) {  // unwatched from its own callback
      if (!w->armed) self->free_dying(w);
      return;
    }
    if (res < 0) {
      // The watch is over; the owner still calls unwatch_fd().
      if (w->armed) {
        io_uring_sqe* s = self->get_sqe();
        io_uring_prep_poll_remove(s, reinterpret_cast<uint64_t>(&w->op));
        io_uring_sqe_set_data(s, nullptr);
      }
      return;
    }
    if (!w->armed) self->arm_watch(*w);
  }

  void arm_event() noexcept {
    if (event_armed || event_fd < 0) return;
    io_uring_sqe* s = get_sqe();
    io_uring_prep_read(s, event_fd, &event_value, sizeof(event_value), 0);
    io_uring_sqe_set_data(s, &event_op.op);
    event_armed = true;
  }

  io_uring_sqe* get_sqe() noexcept {
    for (;;) {
      io_uring_sqe* s = io_uring_get_sqe(&ring);
      if (s != nullptr) return s;
      // Ring full: push what is queued to the kernel. A ring still disabled (nobody ran the loop yet)
      // gets bound to the calling thread, which is then the one that must run it.
      if (ring_disabled) bind_thread();
      int rc = io_uring_submit(&ring);
      if (rc < 0 && rc != -EAGAIN && rc != -EBUSY && rc != -EINTR) {
        spdlog::error("reactor {}: io_uring_submit failed: {}", opts.name, std::strerror(-rc));
        std::this_thread::yield();
      }
    }
  }

  void bind_thread() noexcept {
    owner.store(std::this_thread::get_id(), std::memory_order_relaxed);
    if (ring_disabled) {
      // liburing 2.3 declares io_uring_enable_rings() but does not export it: use the syscall.
      long rc = ::syscall(__NR_io_uring_register, ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
      if (rc < 0) spdlog::error("reactor {}: IORING_REGISTER_ENABLE_RINGS: {}", opts.name, std::strerror(errno));
      ring_disabled = false;
    }
  }

  bool drain_posted() {
    {
      std::lock_guard lock(post_mu);
      running.swap(posted);
      has_posted.store(false, std::memory_order_release);
    }
    bool any = !running.empty();
    for (auto& fn : running) {
      if (fn) fn();
    }
    running.clear();
    return any;
  }

  // Timers due at `now`. The busy loop calls this every turn: when nothing is due it costs one compare.
  bool run_timers(Clock::time_point now) {
    bool any = false;
    while (!timers.empty() && timers.top().deadline <= now) {
      uint64_t id = timers.top().id;
      timers.pop();
      auto it = timer_fns.find(id);
      if (it == timer_fns.end()) continue;  // cancelled
      auto fn = std::move(it->second);
      timer_fns.erase(it);
      fn();
      any = true;
    }
    return any;
  }

  // Drop cancelled timers at the top so they do not shorten the sleep (before sleeping only).
  void drop_cancelled_timers() {
    while (!timers.empty() && timer_fns.find(timers.top().id) == timer_fns.end()) timers.pop();
  }

  // Reap every available CQE: copy them out in one pass (io_uring_for_each_cqe + one cq_advance), then
  // run the hooks, which may queue new SQEs.
  unsigned reap() noexcept {
    unsigned total = 0;
    for (;;) {
      struct Done {
        uint64_t data;
        int res;
        uint32_t flags;
      };
      std::array<Done, kReapBatch> done;
      unsigned n = 0;
      unsigned head;
      io_uring_cqe* cqe;
      io_uring_for_each_cqe(&ring, head, cqe) {
        done[n++] = Done{cqe->user_data, cqe->res, cqe->flags};
        if (n == kReapBatch) break;
      }
      if (n == 0) break;
      io_uring_cq_advance(&ring, n);
      for (unsigned i = 0; i < n; ++i) {
        // 0: fire-and-forget SQEs (cancels); LIBURING_UDATA_TIMEOUT: liburing's own wait timeout.
        if (done[i].data == 0 || done[i].data == LIBURING_UDATA_TIMEOUT) continue;
        IoOp* op = reinterpret_cast<IoOp*>(static_cast<uintptr_t>(done[i].data));
        if (op->fn != nullptr) op->fn(op, done[i].res, done[i].flags);
      }
      total += n;
      if (n < kReapBatch) break;
    }
    return total;
  }

  // Completions wait in the kernel: task work to run (COOP_TASKRUN) or CQEs that overflowed the CQ ring.
  bool taskrun_pending() const noexcept {
    return (IO_URING_READ_ONCE(*ring.sq.kflags) & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) != 0;
  }

  void submit_nowait() noexcept {
    if (io_uring_sq_ready(&ring) > 0) {
      int rc = io_uring_submit(&ring);
      if (rc < 0 && rc != -EAGAIN && rc != -EBUSY && rc != -EINTR) {
        spdlog::error("reactor {}: io_uring_submit: {}", opts.name, std::strerror(-rc));
      }
    } else if (taskrun_pending()) {
      io_uring_get_events(&ring);
    }
  }

  void submit_and_wait(Clock::duration max_wait) noexcept {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(max_wait).count();
    if (ns < 0) ns = 0;
    __kernel_timespec ts{};
    ts.tv_sec = ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    io_uring_cqe* cqe = nullptr;
    int rc = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, nullptr);
    if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      spdlog::error("reactor {}: io_uring_submit_and_wait_timeout: {}", opts.name, std::strerror(-rc));
    }
  }
};

Reactor::Reactor() : impl_(std::make_unique<Impl>()) {}
Reactor::~Reactor() = default;

Result<std::unique_ptr<Reactor>> Reactor::create(const ReactorOptions& opts) {
  std::unique_ptr<Reactor> r(new Reactor());
  Impl& im = *r->impl_;
  im.opts = opts;
  int last_err = 0;
  for (unsigned flags : kSetupFlags) {
    io_uring_params p{};
    p.flags = flags;
    int rc = io_uring_queue_init_params(opts.ring_entries, &im.ring, &p);
    if (rc == 0) {
      im.ring_ready = true;
      im.setup_flags = flags;
      im.ring_disabled = (flags & IORING_SETUP_R_DISABLED) != 0;
      break;
    }
    last_err = -rc;
  }
  if (!im.ring_ready) return make_error(std::string("io_uring_queue_init: ") + std::strerror(last_err), last_err);
  im.event_fd = ::eventfd(0, EFD_CLOEXEC);
  if (im.event_fd < 0) return make_error(std::string("eventfd: ") + std::strerror(errno), errno);
  im.event_op.op.fn = &Impl::on_event;
  im.event_op.self = &im;
  im.arm_event();
  spdlog::debug("reactor {}: io_uring flags {:#x}", opts.name, im.setup_flags);
  return r;
}

io_uring* Reactor::ring() noexcept { return &impl_->ring; }

io_uring_sqe* Reactor::sqe() noexcept { return impl_->get_sqe(); }

io_uring_sqe* Reactor::sqe_for(IoOp* op) noexcept {
  io_uring_sqe* s = impl_->get_sqe();
  io_uring_sqe_set_data(s, op);
  return s;
}

void Reactor::add_poller(Poller* p) {
  auto& v = impl_->pollers;
  if (std::find(v.begin(), v.end(), p) == v.end()) v.push_back(p);
}

void Reactor::remove_poller(Poller* p) {
  // Null it out: remove_poller may run from inside a poller's poll() during iteration.
  for (auto& q : impl_->pollers) {
    if (q == p) {
      q = nullptr;
      impl_->pollers_dirty = true;
    }
  }
}

void Reactor::watch_fd(int fd, IoOp* op) {
  Impl& im = *impl_;
  if (im.watches.count(op) != 0) {
    spdlog::error("reactor {}: fd {} watched twice with the same op; keeping the first watch", im.opts.name, fd);
    return;
  }
  auto w = std::make_unique<Impl::FdWatch>();
  w->op.fn = &Impl::on_watch;
  w->self = &im;
  w->fd = fd;
  w->user = op;
  im.arm_watch(*w);
  im.watches.emplace(op, std::move(w));
}

void Reactor::unwatch_fd(IoOp* op) {
  Impl& im = *impl_;
  auto it = im.watches.find(op);
  if (it == im.watches.end()) return;
  std::unique_ptr<Impl::FdWatch> w = std::move(it->second);
  im.watches.erase(it);
  w->user = nullptr;
  if (w->armed) {
    // Its last CQE (-ECANCELED, or a readiness that raced the removal) frees it.
    io_uring_sqe* s = im.get_sqe();
    io_uring_prep_poll_remove(s, reinterpret_cast<uint64_t>(&w->op));
    io_uring_sqe_set_data(s, nullptr);
    im.dying.push_back(std::move(w));
  } else if (w->in_callback) {
    im.dying.push_back(std::move(w));  // on_watch frees it when the callback returns
  }
}

void Reactor::post(std::function<void()> fn) {
  Impl& im = *impl_;
  bool wake;
  {
    std::lock_guard lock(im.post_mu);
    im.posted.push_back(std::move(fn));
    wake = !im.has_posted.exchange(true, std::memory_order_acq_rel);
  }
  if (wake) {
    uint64_t one = 1;
    ssize_t rc = ::write(im.event_fd, &one, sizeof(one));
    (void)rc;  // EAGAIN only when the counter is saturated: the reactor is awake anyway
  }
}

uint64_t Reactor::schedule(std::chrono::milliseconds delay, std::function<void()> fn) {
  Impl& im = *impl_;
  uint64_t id = im.next_timer_id.fetch_add(1, std::memory_order_relaxed);
  auto deadline = Clock::now() + delay;
  auto add = [&im, id, deadline, f = std::move(fn)]() mutable {
    im.timer_fns.emplace(id, std::move(f));
    im.timers.push(Timer{deadline, id});
  };
  if (on_reactor_thread()) {
    add();
  } else {
    post(std::move(add));
  }
  return id;
}

void Reactor::cancel(uint64_t timer_id) {
  if (on_reactor_thread()) {
    impl_->timer_fns.erase(timer_id);
  } else {
    Impl* im = impl_.get();
    post([im, timer_id] { im->timer_fns.erase(timer_id); });
  }
}

bool Reactor::run_once(bool block) {
  Impl& im = *impl_;
  if (im.owner.load(std::memory_order_relaxed) != std::this_thread::get_id() || im.ring_disabled) im.bind_thread();

  // One clock read per turn (timers, busy-poll window, busy time, and the timestamps the target core takes
  // for its latency statistics): a busy loop spends its time here otherwise. Read first, so that what the
  // pollers complete in this turn is stamped with this turn's time.
  auto now = Clock::now();
  im.turn_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());

  bool work = false;
  for (std::size_t i = 0; i < im.pollers.size(); ++i) {
    Poller* p = im.pollers[i];
    if (p != nullptr && p->poll()) work = true;
  }
  if (im.pollers_dirty) {
    std::erase(im.pollers, nullptr);
    im.pollers_dirty = false;
  }
  if (im.has_posted.load(std::memory_order_acquire) && im.drain_posted()) work = true;
  if (!im.timers.empty() && im.run_timers(now)) work = true;
  if (im.reap() != 0) work = true;

  // The time since the previous turn was busy when that turn worked (and did not sleep).
  if (im.last_turn_worked && now > im.last_turn) {
    const auto d = std::chrono::duration_cast<std::chrono::nanoseconds>(now - im.last_turn).count();
    im.busy_ns.store(im.busy_ns.load(std::memory_order_relaxed) + static_cast<uint64_t>(d), std::memory_order_relaxed);
  }
  im.last_turn = now;
  im.last_turn_worked = work;

  if (work) im.last_work = now;
  bool slept = false;
  const bool idle = !work && now - im.last_work >= im.opts.busy_poll;
  if (block && idle && !im.stop_requested.load(std::memory_order_relaxed) &&
      !im.has_posted.load(std::memory_order_acquire)) {
    im.drop_cancelled_timers();
    slept = true;
    Clock::duration wait = im.opts.max_sleep;
    if (!im.timers.empty()) wait = std::min<Clock::duration>(wait, im.timers.top().deadline - now);
    im.submit_and_wait(wait);
    im.last_turn_worked = false;  // the time until the next turn was (mostly) asleep
  } else {
    im.submit_nowait();
  }
  if (im.reap() != 0) {
    work = true;
    im.last_work = slept ? Clock::now() : now;  // after a sleep `now` is stale: poll a full window again
  }
  return work;
}

void Reactor::run() {
  Impl& im = *impl_;
  im.bind_thread();
  if (!im.opts.name.empty()) {
    std::string n = im.opts.name.substr(0, 15);
    pthread_setname_np(pthread_self(), n.c_str());
  }
  if (im.opts.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<unsigned>(im.opts.cpu), &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
      spdlog::warn("reactor {}: cannot pin to CPU {}", im.opts.name, im.opts.cpu);
    }
  }
  while (!im.stop_requested.load(std::memory_order_acquire)) run_once(true);
  im.stop_requested.store(false, std::memory_order_release);  // run() may be called again
}

void Reactor::stop() {
  impl_->stop_requested.store(true, std::memory_order_release);
  uint64_t one = 1;
  ssize_t rc = ::write(impl_->event_fd, &one, sizeof(one));
  (void)rc;
}

std::chrono::nanoseconds Reactor::busy_time() const noexcept {
  return std::chrono::nanoseconds(impl_->busy_ns.load(std::memory_order_relaxed));
}

std::chrono::nanoseconds Reactor::age() const noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - impl_->created);
}

int Reactor::cpu() const noexcept { return impl_->opts.cpu; }

const uint64_t* Reactor::turn_clock() const noexcept { return &impl_->turn_ns; }

bool Reactor::on_reactor_thread() const noexcept {
  return impl_->owner.load(std::memory_order_relaxed) == std::this_thread::get_id();
}

}  // namespace rdmablk::transport
