// NVMe/TCP, controller side (NVM Express TCP Transport Specification 1.0): a listener that accepts
// connections and spreads them over reactors, and the connection (a TargetQueue) that runs on one of them.
//
// Threading: everything a connection does happens on its reactor's thread, sockets are driven by that
// reactor's io_uring (RECVMSG / SENDMSG / ACCEPT; no epoll anywhere on the target side). The core's
// TargetQueueHandler callbacks arrive on that thread and the core must call back into the queue on it.
//
// Data path per connection (no allocation, no locks): a preallocated request array (2 x queue depth,
// as nvmet-tcp: a slot whose CapsuleResp is on the wire but not yet reported sent must not block the
// host's next command with the same CID), one receive staging buffer, one gather batch with at most one
// SENDMSG in flight. Data lands in and leaves from the reactor BufferPool's buffers directly.
//
// Decisions:
//   - C2HData never carries SUCCESS: a CapsuleResp always follows. Valid whatever the host's SQ flow
//     control setting, and the CQE keeps SQHD meaningful.
//   - One R2T outstanding per command (what MAXR2T = 0 allows and what Linux and SPDK hosts ask for), each
//     R2T at most MAXH2CDATA bytes; a longer write gets the next R2T when the previous window is filled.
//   - A data digest error is fatal to the connection, like nvmet-tcp and SPDK: C2HTermReq with FES 3 (the
//     only digest FES the spec defines; SPDK sends the same), FEI 0.
//   - Protocol violations: C2HTermReq (FES/FEI from the validator) after the batch in flight, then the
//     socket is shut down; on_queue_closed is called once. Requests the core is still waiting data for
//     first get on_data_ready(transient transport error), so the core can finish them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "protocol/result.h"
#include "transport/address.h"
#include "transport/buffer_pool.h"
#include "transport/reactor.h"
#include "transport/target_queue.h"

namespace rdmablk::transport::tcp {

struct TcpTargetOptions {
  uint32_t maxh2cdata = 128 * 1024;        // ICResp MAXH2CDATA; >= 4096 and a multiple of 4 (Linux host checks)
  uint32_t max_c2h_data = 128 * 1024;      // data bytes per C2HData PDU
  uint32_t admin_in_capsule = 8 * 1024;    // in-capsule data accepted on the admin queue (Linux host: 8 KiB)
  uint32_t io_in_capsule = 8 * 1024;       // ... on I/O queues (IOCCSZ = (64 + this) / 16)
  uint16_t max_queue_depth = 128;          // commands the host may have outstanding per connection
  uint32_t max_data_transfer = 1024 * 1024;  // longest data SGL accepted (MDTS); longer -> SGL length invalid
  uint32_t rx_buffer = 64 * 1024;          // receive staging bytes per connection
};

// A reactor a listener may place connections on, with the reactor's buffer pool.
class TcpListener {
 public:
  // Binds and listens now (SO_REUSEADDR; port 0 picks one, see address()), so a port in use is reported
  // to the caller. Accepting starts on reactors[0] (io_uring multishot accept when the kernel has it, else
  // single shot re-armed); each connection goes to the next reactor round robin, by post().
  static Result<std::unique_ptr<TcpListener>> create(const TransportAddress& address,
                                                     std::vector<ReactorSlot> reactors,
                                                     TargetQueueHandler& handler, const TcpTargetOptions& opts = {});
  ~TcpListener();  // stop()
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // The bound address (the real port when 0 was asked for).
  const TransportAddress& address() const noexcept;
  // Stop accepting (thread-safe, idempotent). Established connections are not affected. The listening
  // socket is closed on reactors[0] once its accept is cancelled, so that reactor must keep running.
  void stop() noexcept;

  struct Acceptor;

 private:
  TcpListener() = default;
  Acceptor* acceptor_ = nullptr;  // lives on reactors[0]; deletes itself after stop
  TransportAddress address_;
};

// Connections currently alive in this process (tests use it to wait for teardown).
unsigned live_tcp_target_connections() noexcept;

}  // namespace rdmablk::transport::tcp
