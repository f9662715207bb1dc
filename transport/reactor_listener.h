// What the RDMA and TCP listeners share: the bound address, and the object that listens, which lives on
// reactors[0] and is stopped and freed there.
#pragma once

#include "transport/address.h"
#include "transport/reactor.h"

namespace rdmablk::transport {

// The listening object of a listener (rdma_cm channel, accepting socket), living on reactors[0].
class ListenerHome {
 public:
  virtual ~ListenerHome() = default;
  virtual Reactor& home() const noexcept = 0;  // reactors[0]
  // On home(): stop listening and free this object (at once, or when its pending work is done).
  virtual void stop_on_reactor() noexcept = 0;
};

class ReactorListener {
 public:
  ReactorListener(const ReactorListener&) = delete;
  ReactorListener& operator=(const ReactorListener&) = delete;

  // The bound address (the real port when 0 was asked for).
  const TransportAddress& address() const noexcept { return address_; }
  // Stop listening (thread-safe, idempotent). Established queues are not affected. The listening object
  // stops on reactors[0], which must keep running.
  void stop() noexcept {
    ListenerHome* home = home_;
    if (home == nullptr) return;
    home_ = nullptr;
    try {
      home->home().post([home] { home->stop_on_reactor(); });
    } catch (...) {
    }
  }

 protected:
  ReactorListener() = default;
  ~ReactorListener() { stop(); }

  ListenerHome* home_ = nullptr;  // lives on reactors[0]; deletes itself after stop
  TransportAddress address_;
};

}  // namespace rdmablk::transport
