// NVMe/TCP, host side: how a host queue's bytes reach its non-blocking socket. One interface, three kinds
// chosen once per connection (make_tcp_host_io), so the queue and the connection sequence (tcp_host.cpp)
// carry no TLS branches: plain sendmsg/readv; kTLS (records in the kernel, received with recvmsg to see
// control records); userspace TLS records (a send's iovecs gathered into records, a receive's iovecs
// filled from decrypted records). The target's counterpart is tcp_queue_io.h, over io_uring.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "protocol/result.h"

namespace rdmablk::security {
class TlsSession;
}

namespace rdmablk::transport::tcp {

// The socket I/O of one host connection. The caller owns the fd and passes it to every call; all calls
// are non-blocking and report like the syscalls they stand for (-1 with errno, EAGAIN when the socket is
// full or empty).
class TcpHostIo {
 public:
  virtual ~TcpHostIo() = default;
  // sendmsg: bytes of the iovecs taken.
  virtual ssize_t send(int fd, const iovec* iov, unsigned n) noexcept = 0;
  // readv: bytes received, 0 at the end of the stream.
  virtual ssize_t recv(int fd, const iovec* iov, unsigned n) noexcept = 0;
  // Bytes taken by send() that still wait for the socket (userspace TLS only).
  virtual bool out_pending() const noexcept { return false; }
  // Pushes them out: 1 all out, 0 the socket is full, -errno.
  virtual int flush(int /*fd*/) noexcept { return 1; }
  // A TermReq right before the connection goes: best effort, never blocks.
  virtual void send_now(int fd, std::span<const uint8_t> bytes) noexcept;
  // What the last recv() that failed with EPROTO refused, in words ("kernel TLS: ..."); empty when it
  // has nothing to add to the errno.
  virtual std::string protocol_failure() const { return {}; }
};

// The I/O for a connection: plain when `tls` is null, kTLS when the session moved its keys into the kernel,
// else userspace records over `tls`. `where` names the controller in logs. Null only when out of memory.
std::unique_ptr<TcpHostIo> make_tcp_host_io(std::unique_ptr<security::TlsSession> tls, std::string where);

// Plain socket I/O, stateless and shared (the TLS handshake's flights before a session exists).
TcpHostIo& plain_tcp_host_io() noexcept;

// Waits for `events` on `fd` (or POLLIN on `wake_fd` when >= 0) until `deadline`. Returns fd's revents,
// 0 on timeout or wake-up, -errno on failure.
int wait_fd(int fd, short events, std::chrono::steady_clock::time_point deadline, int wake_fd = -1) noexcept;

// Reads or writes exactly `len` bytes through `io` before `deadline` (the connection sequence's blocking
// steps: TLS handshake flights, ICReq/ICResp). `what` starts the error message.
Result<void> io_exact(TcpHostIo& io, int fd, uint8_t* buf, std::size_t len, bool writing,
                      std::chrono::steady_clock::time_point deadline, const char* what);

}  // namespace rdmablk::transport::tcp
