#include "transport/tcp/tcp_queue_io.h"

#include <sys/socket.h>
#include <unistd.h>

namespace rdmablk::transport::tcp {

TcpSocketIo::TcpSocketIo(Reactor& reactor, int fd) noexcept : reactor_(reactor), fd_(fd) {
  bind(recv_op_, &TcpSocketIo::on_recv_cqe);
  bind(send_op_, &TcpSocketIo::on_send_cqe);
}

TcpSocketIo::~TcpSocketIo() {
  if (timer_ != 0) reactor_.cancel(timer_);
  if (fd_ >= 0) ::close(fd_);
}

void TcpSocketIo::attach(TcpTargetQueue& queue, void (*release)(void*) noexcept, void* owner) noexcept {
  queue_ = &queue;
  release_ = release;
  owner_ = owner;
}

void TcpSocketIo::on_recv_cqe(IoOp* op, int res, uint32_t /*flags*/) noexcept {
  self_of<TcpSocketIo>(op)->queue_->on_recv_done(res);
}

void TcpSocketIo::on_send_cqe(IoOp* op, int res, uint32_t /*flags*/) noexcept {
  self_of<TcpSocketIo>(op)->queue_->on_send_done(res);
}

void TcpSocketIo::recv(const iovec* iov, unsigned n) noexcept { submit_recvmsg(recv_op_, iov, n, {}); }

void TcpSocketIo::send(const iovec* iov, unsigned n) noexcept { submit_sendmsg(iov, n); }

void TcpSocketIo::submit_recvmsg(Op& op, const iovec* iov, unsigned n, std::span<uint8_t> control) noexcept {
  rx_msg_ = msghdr{};
  rx_msg_.msg_iov = const_cast<iovec*>(iov);
  rx_msg_.msg_iovlen = n;
  rx_msg_.msg_control = control.empty() ? nullptr : control.data();
  rx_msg_.msg_controllen = control.size();
  io_uring_prep_recvmsg(reactor_.sqe_for(&op.op), fd_, &rx_msg_, 0);
}

void TcpSocketIo::submit_sendmsg(const iovec* iov, unsigned n) noexcept {
  tx_msg_ = msghdr{};
  tx_msg_.msg_iov = const_cast<iovec*>(iov);
  tx_msg_.msg_iovlen = n;
  io_uring_prep_sendmsg(reactor_.sqe_for(&send_op_.op), fd_, &tx_msg_, MSG_NOSIGNAL);
}

void TcpSocketIo::send_now(std::span<const uint8_t> bytes) noexcept {
  ssize_t rc = ::send(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)rc;
}

void TcpSocketIo::shutdown() noexcept { ::shutdown(fd_, SHUT_RDWR); }

void TcpSocketIo::start_close_timer(std::chrono::milliseconds delay) noexcept {
  try {
    timer_ = reactor_.schedule(delay, [this] {
      timer_ = 0;
      queue_->on_close_timer();
    });
  } catch (...) {
    queue_->on_close_timer();  // no memory for a timer: give up on the TermReq now
  }
}

void TcpSocketIo::cancel_close_timer() noexcept {
  if (timer_ == 0) return;
  reactor_.cancel(timer_);
  timer_ = 0;
}

void TcpSocketIo::destroy() noexcept { close_and_release(); }

void TcpSocketIo::close_and_release() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  // Not now: callers up the stack may still touch the connection.
  reactor_.post([release = release_, owner = owner_] { release(owner); });
}

std::unique_ptr<TcpSocketIo> make_tcp_queue_io(Reactor& reactor, int fd, const TcpTlsServerOptions& tls) {
  if (tls.policy != TlsPolicy::none && tls.context) return make_tls_queue_io(reactor, fd, tls);
  return std::make_unique<TcpSocketIo>(reactor, fd);
}

}  // namespace rdmablk::transport::tcp
