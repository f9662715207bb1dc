// NVMe/TCP, controller side (NVM Express TCP Transport Specification 1.0): a listener that accepts
// connections and spreads them over reactors. Each connection is a socket driven by its reactor's io_uring
// (RECVMSG / SENDMSG / ACCEPT; no epoll anywhere on the target side) under a TcpTargetQueue, the binding's
// state machine (tcp_target_queue.h). The core's TargetQueueHandler callbacks arrive on that reactor's
// thread and the core must call back into the queue on it.
//
// TLS 1.3 (TcpTargetOptions::tls, tcp_tls.h): none, optional or required per listener, with a server
// TlsContext whose PSK lookup the caller supplies. The handshake precedes ICReq and runs on the
// connection's reactor; the queue is announced to the core first, so the core's connect timeout also ends
// a handshake that stalls. TcpTargetQueue::tls() says what was negotiated.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "protocol/result.h"
#include "transport/address.h"
#include "transport/buffer_pool.h"
#include "transport/connection_limits.h"
#include "transport/reactor.h"
#include "transport/reactor_listener.h"
#include "transport/target_queue.h"
#include "transport/tcp/tcp_target_queue.h"

namespace rdmablk::transport::tcp {

// A reactor a listener may place connections on, with the reactor's buffer pool.
class TcpListener : public ReactorListener {
 public:
  // Binds and listens now (SO_REUSEADDR; port 0 picks one, see address()), so a port in use is reported
  // to the caller. After start(), accepting runs on reactors[0] (io_uring multishot accept when the kernel has it, else
  // single shot re-armed); each connection goes to the next reactor round robin, by post(). With a `gate`, a
  // connection beyond its limits is closed at once (a rate-limited log line says which limit).
  static Result<std::unique_ptr<TcpListener>> create(const TransportAddress& address,
                                                     std::vector<ReactorSlot> reactors,
                                                     TargetQueueHandler& handler, const TcpTargetOptions& opts = {},
                                                     std::shared_ptr<ConnectionGate> gate = nullptr);
  // Options for the connections accepted from now on (a live TLS policy change); those up keep theirs.
  // Checked as create() checks them.
  Result<void> set_options(const TcpTargetOptions& opts);
  // start(): accepting begins on reactors[0].
  // stop(): the listening socket is closed on reactors[0] once its accept is cancelled.

  struct Acceptor;

 private:
  TcpListener() = default;
};

// Connections currently alive in this process (tests use it to wait for teardown).
unsigned live_tcp_target_connections() noexcept;
// Listener acceptors not yet freed: TcpListener::stop() frees its acceptor on its reactor once the cancelled
// accept has completed, so a reactor must keep running until this is 0 (else the acceptor leaks).
unsigned live_tcp_acceptors() noexcept;

}  // namespace rdmablk::transport::tcp
