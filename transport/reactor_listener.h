// What the RDMA and TCP listeners share: the bound address, and the object that listens, which lives on
// reactors[0] and is started, stopped and freed there.
#pragma once

#include <cerrno>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "protocol/result.h"
#include "transport/address.h"
#include "transport/reactor.h"

namespace rdmablk::transport {

// The listening object of a listener (rdma_cm channel, accepting socket), living on reactors[0].
class ListenerHome {
 public:
  // Its socket or channel is closed by then: whoever waits in ReactorListener::stop_and_wait may bind the
  // endpoint again.
  virtual ~ListenerHome() {
    if (closed) closed->set_value();
  }
  virtual Reactor& home() const noexcept = 0;  // reactors[0]
  // On home(): start accepting connections.
  virtual void start_on_reactor() noexcept = 0;
  // On home(): stop listening and free this object (at once, or when its pending work is done).
  virtual void stop_on_reactor() noexcept = 0;

  // Set by stop_and_wait() before the stop is posted (the post orders it before the destructor's read).
  std::shared_ptr<std::promise<void>> closed;
};

class ReactorListener {
 public:
  // What every listener's create() asks of its reactors: at least one, each with its buffer pool.
  static Result<void> check_reactors(const std::vector<ReactorSlot>& reactors, const std::string& kind) {
    if (reactors.empty()) return make_error(kind + " listener needs at least one reactor", EINVAL);
    for (const auto& r : reactors) {
      if (r.reactor == nullptr || r.pool == nullptr)
        return make_error(kind + " listener: reactor without buffer pool", EINVAL);
    }
    return {};
  }

  ReactorListener(const ReactorListener&) = delete;
  ReactorListener& operator=(const ReactorListener&) = delete;

  // The bound address (the real port when 0 was asked for).
  const TransportAddress& address() const noexcept { return address_; }

  // Start accepting (thread-safe; once). create() binds and listens, so until start() the kernel keeps the
  // connections that arrive in the socket's backlog: the daemon makes the core know a listener before the
  // first connection on it is accepted. False when the start could not be posted (no memory) or the
  // listener is stopped.
  bool start() noexcept {
    ListenerHome* home = home_;
    if (home == nullptr) return false;
    if (started_) return true;
    try {
      home->home().post([home] { home->start_on_reactor(); });
    } catch (...) {
      return false;
    }
    started_ = true;
    return true;
  }

  // Stop listening (thread-safe, idempotent). Established queues are not affected. The listening object
  // stops on reactors[0], which must keep running.
  void stop() noexcept { (void)post_stop(nullptr); }

  // stop(), then wait until the socket or channel is closed, so that the same endpoint can be bound again
  // at once (a listener removed and added back). False when reactors[0] did not get to it within `timeout`.
  bool stop_and_wait(std::chrono::milliseconds timeout) noexcept {
    std::shared_ptr<std::promise<void>> closed;
    std::future<void> done;
    try {
      closed = std::make_shared<std::promise<void>>();
      done = closed->get_future();
    } catch (...) {
      closed.reset();
    }
    if (!post_stop(closed) || !closed) return false;
    return done.wait_for(timeout) == std::future_status::ready;
  }

 protected:
  ReactorListener() = default;
  ~ReactorListener() { stop(); }

  ListenerHome* home_ = nullptr;  // lives on reactors[0]; deletes itself after stop
  TransportAddress address_;

 private:
  // False when there was nothing to stop or the stop could not be posted.
  bool post_stop(std::shared_ptr<std::promise<void>> closed) noexcept {
    ListenerHome* home = home_;
    if (home == nullptr) return false;
    home_ = nullptr;
    home->closed = std::move(closed);
    try {
      home->home().post([home] { home->stop_on_reactor(); });
    } catch (...) {
      return false;
    }
    return true;
  }

  bool started_ = false;
};

}  // namespace rdmablk::transport
