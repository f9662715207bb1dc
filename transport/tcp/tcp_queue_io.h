// The socket under a target connection's TcpTargetQueue: the queue's TcpQueueIo (tcp_target_queue.h) on the
// reactor's io_uring, chosen once when the connection is made (make_tcp_queue_io) and called by the queue
// without knowing which it is:
//
//   - TcpSocketIo: plain NVMe/TCP. The queue's recv / send are one RECVMSG / SENDMSG each on the socket,
//     straight into and out of the queue's iovecs (no copy); their CQEs go to the queue.
//   - the TLS one (tcp_tls_io.cpp, for a listener with a TLS policy): a TcpSocketIo that runs TLS 1.3 under
//     the queue. The queue's first recv starts a MSG_PEEK of the first byte (0x16: a ClientHello; else plain
//     NVMe/TCP, refused under `required` by closing the socket, as nvmet does), then the handshake runs here
//     through io_uring recv/send while the queue's recv stays pending, so a stalled handshake is ended by the
//     core's connect timeout like a silent plain connection. After it: kernel TLS when the kernel has the tls
//     ULP (the queue's recv/send then go to the socket as on a plain connection, a recv with room for the
//     record type), else userspace records: what a recv brings is decrypted into the queue's iovecs, what
//     the queue sends is encrypted into a ciphertext buffer whose flush completes the queue's send.
//
// Both also carry the connection's close timer, and free the connection (`release`) once the socket is
// closed and no operation of theirs is in flight.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>

#include "transport/reactor.h"
#include "transport/tcp/tcp_target_queue.h"
#include "transport/tcp/tcp_tls.h"

namespace rdmablk::transport::tcp {

class TcpSocketIo : public TcpQueueIo {
 public:
  TcpSocketIo(Reactor& reactor, int fd) noexcept;
  virtual ~TcpSocketIo();  // cancels the close timer, closes the socket if still open
  TcpSocketIo(const TcpSocketIo&) = delete;
  TcpSocketIo& operator=(const TcpSocketIo&) = delete;

  // The queue the completions go to, and what frees the connection after destroy() (posted on the reactor,
  // called once). Before the queue starts.
  void attach(TcpTargetQueue& queue, void (*release)(void* owner) noexcept, void* owner) noexcept;

  void recv(const iovec* iov, unsigned n) noexcept override;
  void send(const iovec* iov, unsigned n) noexcept override;
  // Straight from the stack's send buffer: a plain non-blocking send keeps the error path simple.
  void send_now(std::span<const uint8_t> bytes) noexcept override;
  void shutdown() noexcept override;
  void start_close_timer(std::chrono::milliseconds delay) noexcept final;
  void cancel_close_timer() noexcept final;
  void destroy() noexcept override;

 protected:
  // An IoOp with a way back to its owner (standard layout: IoOp* -> Op* is a plain cast).
  struct Op {
    IoOp op;
    TcpSocketIo* self;
  };
  template <typename T>
  static T* self_of(IoOp* op) noexcept {
    return static_cast<T*>(reinterpret_cast<Op*>(op)->self);
  }
  void bind(Op& op, void (*fn)(IoOp*, int, uint32_t) noexcept) noexcept { op = Op{IoOp{fn}, this}; }

  // RECVMSG into the iovecs; `control` (kTLS: the record type) may be empty. Completes on `op`.
  void submit_recvmsg(Op& op, const iovec* iov, unsigned n, std::span<uint8_t> control) noexcept;
  void submit_sendmsg(const iovec* iov, unsigned n) noexcept;
  // Closes the socket and posts `release` (nothing of ours may be in flight any more).
  void close_and_release() noexcept;

  Reactor& reactor_;
  int fd_;
  TcpTargetQueue* queue_ = nullptr;
  msghdr rx_msg_{};

 private:
  static void on_recv_cqe(IoOp* op, int res, uint32_t flags) noexcept;
  static void on_send_cqe(IoOp* op, int res, uint32_t flags) noexcept;

  Op recv_op_{};
  Op send_op_{};
  msghdr tx_msg_{};
  uint64_t timer_ = 0;
  void (*release_)(void*) noexcept = nullptr;
  void* owner_ = nullptr;
};

// The socket I/O for a connection accepted on `fd` under a listener's TLS options: TLS when the policy is
// not none (and a context is set), else plain.
std::unique_ptr<TcpSocketIo> make_tcp_queue_io(Reactor& reactor, int fd, const TcpTlsServerOptions& tls);
// The TLS one (tcp_tls_io.cpp).
std::unique_ptr<TcpSocketIo> make_tls_queue_io(Reactor& reactor, int fd, const TcpTlsServerOptions& tls);

}  // namespace rdmablk::transport::tcp
