// What the target core needs from a reactor thread, as a small interface so that the core can be driven by
// a fake in unit tests and by transport::Reactor in the daemon (ReactorAdapter below).
//
// The core calls these from the control path only (Connect, timers, reload messages, lazily opening a
// backend queue); the data path never goes through them except Poller::poll on the owning thread.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>

#include "transport/buffer_pool.h"
#include "transport/reactor.h"

namespace rdmablk::target {

class CoreReactor {
 public:
  virtual ~CoreReactor() = default;
  // True on this reactor's thread (the core finds the reactor a new queue lives on with it).
  virtual bool on_thread() const noexcept = 0;
  // Run fn on this reactor's thread (thread-safe).
  virtual void post(std::function<void()> fn) = 0;
  // Run fn on this reactor's thread after `delay` (called on this reactor's thread).
  virtual uint64_t schedule(std::chrono::milliseconds delay, std::function<void()> fn) = 0;
  virtual void cancel(uint64_t timer_id) = 0;
  // Busy-poll hooks (called on this reactor's thread); the core registers one per reactor to reap its
  // backend queues.
  virtual void add_poller(transport::Poller* p) = 0;
  virtual void remove_poller(transport::Poller* p) = 0;
  // Wake the reactor when `fd` polls readable (a backend queue's event_fd()): op->fn(op, revents, 0) on
  // this reactor's thread (transport::Reactor::watch_fd). The poller reaps what woke it; it reports work
  // only when it reaped some, so the reactor sleeps while backend I/O is merely in flight.
  virtual void watch_fd(int fd, transport::IoOp* op) = 0;
  virtual void unwatch_fd(transport::IoOp* op) = 0;
  // The reactor's registered data buffers (io_uring fixed buffer index 0 of every backend queue opened on
  // this reactor = BufferPool::region()); empty = no fixed buffers.
  virtual std::span<const iovec> registered_buffers() const noexcept = 0;
  // The reactor's per-turn clock (transport::Reactor::turn_clock), read on its thread for latency statistics;
  // nullptr = none (the core then reads the clock itself).
  virtual const uint64_t* turn_clock() const noexcept { return nullptr; }
};

// The daemon's adapter: a transport::Reactor and (optionally) its BufferPool. Header-only so that the
// unit tests, which use a fake, do not need the reactor's implementation.
class ReactorAdapter final : public CoreReactor {
 public:
  explicit ReactorAdapter(transport::Reactor& reactor, const transport::BufferPool* pool = nullptr)
      : reactor_(reactor) {
    if (pool != nullptr) region_ = pool->region();
  }
  bool on_thread() const noexcept override { return reactor_.on_reactor_thread(); }
  void post(std::function<void()> fn) override { reactor_.post(std::move(fn)); }
  uint64_t schedule(std::chrono::milliseconds delay, std::function<void()> fn) override {
    return reactor_.schedule(delay, std::move(fn));
  }
  void cancel(uint64_t timer_id) override { reactor_.cancel(timer_id); }
  void add_poller(transport::Poller* p) override { reactor_.add_poller(p); }
  void remove_poller(transport::Poller* p) override { reactor_.remove_poller(p); }
  void watch_fd(int fd, transport::IoOp* op) override { reactor_.watch_fd(fd, op); }
  void unwatch_fd(transport::IoOp* op) override { reactor_.unwatch_fd(op); }
  std::span<const iovec> registered_buffers() const noexcept override {
    if (region_.iov_base == nullptr) return {};
    return {&region_, 1};
  }
  const uint64_t* turn_clock() const noexcept override { return reactor_.turn_clock(); }
  transport::Reactor& reactor() noexcept { return reactor_; }

 private:
  transport::Reactor& reactor_;
  iovec region_{nullptr, 0};
};

}  // namespace rdmablk::target
