// What turns rdma_queue_bench's reactor: the daemon's transport::Reactor, or (--driver pollers) a bare loop
// over the pollers, to split out the reactor loop's own cost.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench/rdma_queue_bench/common.h"
#include "target/core/core_reactor.h"
#include "transport/buffer_pool.h"
#include "transport/reactor.h"

namespace rdmablk::bench::rdma_queue {

// --driver pollers: the core's reactor interface with nothing behind it but a poller list and a message
// FIFO (the null backend has no fd to watch; nothing in this run sets a timer). Owned by the thread that
// called bind() last (the core picks a new queue's reactor with on_thread()); post() may come from any thread.
class LoopReactor final : public target::CoreReactor {
 public:
  explicit LoopReactor(const transport::BufferPool& pool) : region_(pool.region()) {}
  void bind() noexcept { owner_.store(std::this_thread::get_id(), std::memory_order_relaxed); }
  bool on_thread() const noexcept override { return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id(); }
  void post(std::function<void()> fn) override {
    std::lock_guard lock(post_mu_);
    posted_.push_back(std::move(fn));
    has_posted_.store(true, std::memory_order_release);
  }
  uint64_t schedule(std::chrono::milliseconds, std::function<void()>) override { return ++timers_; }
  void cancel(uint64_t) override {}
  void add_poller(transport::Poller* poller) override { pollers_.push_back(poller); }
  void remove_poller(transport::Poller* poller) override { std::erase(pollers_, poller); }
  void watch_fd(int, transport::IoOp*) override {}
  void unwatch_fd(transport::IoOp*) override {}
  std::span<const iovec> registered_buffers() const noexcept override { return {&region_, 1}; }

  bool run_once() {
    bool work = false;
    if (has_posted_.load(std::memory_order_acquire)) {
      std::deque<std::function<void()>> run;
      {
        std::lock_guard lock(post_mu_);
        run.swap(posted_);
        has_posted_.store(false, std::memory_order_relaxed);
      }
      for (auto& fn : run) fn();
      work = true;
    }
    for (std::size_t i = 0; i < pollers_.size(); ++i) work = pollers_[i]->poll() || work;
    return work;
  }

 private:
  iovec region_;
  std::atomic<std::thread::id> owner_;
  std::atomic<bool> has_posted_{false};
  std::mutex post_mu_;
  std::deque<std::function<void()>> posted_;
  std::vector<transport::Poller*> pollers_;
  uint64_t timers_ = 0;
};

class Driver {
 public:
  Driver(const std::string& mode, const transport::BufferPool& pool, unsigned index) {
    if (mode == "reactor") {
      transport::ReactorOptions ro;
      ro.name = fmt::format("bench-reactor{}", index);
      auto r = transport::Reactor::create(ro);
      if (!r) die("cannot create a reactor: " + r.error().message);
      reactor_ = std::move(*r);
      // Not run here: the first run_once() binds the reactor (and its io_uring, a single-issuer ring: the
      // kernel refuses submissions from any other thread with EEXIST) to the calling thread, bind()'s.
      adapter_ = std::make_unique<target::ReactorAdapter>(*reactor_, &pool);
    } else {
      loop_ = std::make_unique<LoopReactor>(pool);
    }
  }
  // Makes the calling thread the reactor's (its queues are created and polled there). Once, first thing.
  void bind() {
    if (reactor_) {
      reactor_->run_once(false);
    } else {
      loop_->bind();
    }
  }
  target::CoreReactor& core_reactor() noexcept {
    if (adapter_) return *adapter_;
    return *loop_;
  }
  void turn() {
    if (reactor_) {
      reactor_->run_once(false);
    } else {
      loop_->run_once();
    }
  }

 private:
  std::unique_ptr<transport::Reactor> reactor_;
  std::unique_ptr<target::ReactorAdapter> adapter_;
  std::unique_ptr<LoopReactor> loop_;
};

}  // namespace rdmablk::bench::rdma_queue
