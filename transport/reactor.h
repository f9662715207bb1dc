// A reactor: one thread, one io_uring that drives everything the thread owns (its sockets, the RDMA
// completion-channel fd, the backend queues' completion fds), plus a message queue for other threads.
//
// The data path never allocates and never locks: an operation is submitted with an IoOp that the
// caller owns (embedded in its connection or request), and the completion calls op->fn(op, res, flags)
// - one indirect call per completion. Control-path work (timers, cross-thread messages) may allocate.
//
// Loop: run pollers (busy-poll hooks: backend queues, RDMA CQs) -> submit queued SQEs and reap CQEs.
// While there is work (a poller reaped something, a CQE, a message, a timer) it never blocks, and it keeps
// polling for ReactorOptions::busy_poll after the last work; then it blocks in io_uring_wait until an fd
// (its sockets, a watch_fd()), a timer or a message wakes it. A poller must therefore report work only
// when it did some: whatever it waits for must come with an fd to watch, or the reactor sleeps through it.
#pragma once

#include <liburing.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "protocol/result.h"

namespace rdmablk::transport {

// An asynchronous operation's completion hook. Embed one in the object that owns the operation; its
// address is the SQE's user_data. `res` is the CQE's res (bytes or -errno), `flags` its flags.
struct IoOp {
  void (*fn)(IoOp* op, int res, uint32_t flags) noexcept = nullptr;
};

// A busy-poll hook, called every loop iteration. Returns true when it did work (the loop then keeps
// polling instead of sleeping).
class Poller {
 public:
  virtual ~Poller() = default;
  virtual bool poll() noexcept = 0;
};

struct ReactorOptions {
  unsigned ring_entries = 1024;
  std::string name = "reactor";      // thread name (for logs and top)
  int cpu = -1;                       // pin to this CPU, or -1
  std::chrono::microseconds busy_poll{50};  // keep polling this long after the last work before sleeping
  // The longest sleep when idle with no timer due (posts, timers and watched fds end a sleep themselves;
  // pollers whose fd watch failed are served at these wake-ups). Tests lengthen it so that a missed wake-up
  // shows as a hang, not as a 1 s delay that a timing check would have to tell from a loaded machine's.
  std::chrono::milliseconds max_sleep{1000};
};

class Reactor {
 public:
  static Result<std::unique_ptr<Reactor>> create(const ReactorOptions& opts);
  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  io_uring* ring() noexcept;
  // A free SQE, submitting queued ones first if the ring is full. Never null.
  io_uring_sqe* sqe() noexcept;
  // Convenience: an SQE whose user_data is op.
  io_uring_sqe* sqe_for(IoOp* op) noexcept;

  void add_poller(Poller* p);
  void remove_poller(Poller* p);

  // Wake this reactor when `fd` polls readable (a backend queue's completion eventfd, an RDMA completion
  // channel): op->fn(op, revents, 0) runs on this thread each time it does (or once with -errno when the
  // poll fails; the watch then ends). IORING_OP_POLL_ADD, multishot when the kernel keeps it armed, else
  // re-armed after each callback: the callback must clear the readiness (read the eventfd, ...) or it is
  // called again at once. Neither `op` nor the fd may go away before unwatch_fd(op). Reactor thread only.
  void watch_fd(int fd, IoOp* op);
  // Stop watching: no callback for `op` after this returns (the fd may then be closed). Reactor thread only.
  void unwatch_fd(IoOp* op);

  // Run `fn` on this reactor's thread (thread-safe; control path).
  void post(std::function<void()> fn);
  // Run `fn` on this thread after `delay`; returns an id for cancel(). Control path (allocates).
  uint64_t schedule(std::chrono::milliseconds delay, std::function<void()> fn);
  void cancel(uint64_t timer_id);

  // Run the loop on the calling thread until stop(). run_once() processes what is ready (tests).
  void run();
  bool run_once(bool block);
  void stop();  // thread-safe
  bool on_reactor_thread() const noexcept;

  // Time spent in loop turns that did work (not asleep, not idle polling), and since creation; any thread.
  std::chrono::nanoseconds busy_time() const noexcept;
  std::chrono::nanoseconds age() const noexcept;
  int cpu() const noexcept;  // ReactorOptions::cpu
  // The steady clock (ns) read at the start of the current loop turn: a timestamp that costs nothing, exact
  // to a turn. Read it on the reactor's thread only.
  const uint64_t* turn_clock() const noexcept;

 private:
  Reactor();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class BufferPool;

// Where a connection lives: the reactor thread that drives it and that reactor's buffer pool. Listeners of
// every transport spread their connections over a list of these.
struct ReactorSlot {
  Reactor* reactor = nullptr;
  BufferPool* pool = nullptr;
};

}  // namespace rdmablk::transport
