#include "transport/tcp/tcp_target.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <spdlog/spdlog.h>

#include "protocol/tcp_pdu.h"
#include "transport/log_limit.h"
#include "transport/tcp/tcp_io.h"
#include "transport/tcp/tcp_queue_io.h"
#include "transport/tcp/tcp_target_queue.h"

namespace rdmablk::transport::tcp {

namespace pt = rdmablk::protocol::tcp;

namespace {

std::atomic<unsigned> g_live_connections{0};
std::atomic<unsigned> g_live_acceptors{0};

// A connection on its reactor: the socket's I/O (tcp_queue_io.h: plain, or TLS under the listener's policy,
// chosen here once) under the TcpTargetQueue state machine. Freed (by a task the I/O posts) when the queue
// is finished.
class TcpTargetConnection {
 public:
  TcpTargetConnection(std::unique_ptr<TcpSocketIo> io, int fd, const ReactorSlot& where, TargetQueueHandler& handler,
                      const TcpTargetOptions& opts, ConnectionTicket ticket)
      : ticket_(std::move(ticket)),
        io_(std::move(io)),
        queue_(*io_, *where.pool, handler, opts, local_address_of(fd), peer_name_of(fd)) {
    io_->attach(queue_, [](void* self) noexcept { delete static_cast<TcpTargetConnection*>(self); }, this);
    g_live_connections.fetch_add(1, std::memory_order_relaxed);
  }

  ~TcpTargetConnection() { g_live_connections.fetch_sub(1, std::memory_order_relaxed); }

  void start() noexcept { queue_.start(); }

 private:
  ConnectionTicket ticket_;        // our place under the connection limits, freed last
  std::unique_ptr<TcpSocketIo> io_;  // the socket (closed with it)
  TcpTargetQueue queue_;
};

}  // namespace

unsigned live_tcp_target_connections() noexcept { return g_live_connections.load(std::memory_order_relaxed); }
unsigned live_tcp_acceptors() noexcept { return g_live_acceptors.load(std::memory_order_relaxed); }

// ---- listener ---------------------------------------------------------------------------------------

struct TcpListener::Acceptor final : ListenerHome {
  struct Op {
    IoOp op;
    Acceptor* self;
  };
  std::vector<ReactorSlot> reactors;
  TargetQueueHandler* handler = nullptr;
  TcpTargetOptions opts;
  std::shared_ptr<ConnectionGate> gate;
  unsigned gate_listener = 0;
  std::string name;  // "127.0.0.1:4420", for logs
  int fd = -1;
  Op op{};
  bool multishot = true;
  bool seen_success = false;
  bool armed = false;
  bool stopping = false;
  uint64_t retry_timer = 0;  // a re-arm after EMFILE/ENFILE/ENOMEM is pending: stop cancels it
  std::size_t next = 0;

  Acceptor() { g_live_acceptors.fetch_add(1, std::memory_order_relaxed); }
  ~Acceptor() override { g_live_acceptors.fetch_sub(1, std::memory_order_relaxed); }
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  Reactor& home() const noexcept override { return *reactors[0].reactor; }
  void start_on_reactor() noexcept override { arm(); }

  void arm() noexcept {
    if (armed || stopping) return;
    io_uring_sqe* sqe = home().sqe_for(&op.op);
    if (multishot) {
      io_uring_prep_multishot_accept(sqe, fd, nullptr, nullptr, SOCK_CLOEXEC);
    } else {
      io_uring_prep_accept(sqe, fd, nullptr, nullptr, SOCK_CLOEXEC);
    }
    armed = true;
  }

  static void on_cqe(IoOp* o, int res, uint32_t flags) noexcept {
    reinterpret_cast<Op*>(o)->self->on_accept(res, flags);
  }

  void on_accept(int res, uint32_t flags) noexcept {
    const bool more = (flags & IORING_CQE_F_MORE) != 0;
    if (!more) armed = false;
    if (res >= 0) {
      seen_success = true;
      if (stopping) {
        ::close(res);
      } else {
        hand_off(res);
      }
    } else if (res == -EINVAL && multishot && !seen_success && !stopping) {
      spdlog::info("nvme-tcp: multishot accept not supported, re-arming single-shot accepts");
      multishot = false;
    } else if (res != -ECANCELED && !stopping && peer_error_log_allowed()) {
      spdlog::warn("nvme-tcp: accept failed: {}", std::strerror(-res));
    }
    if (armed) return;
    if (stopping) {
      ::close(fd);
      delete this;
      return;
    }
    if (res == -EMFILE || res == -ENFILE || res == -ENOMEM) {
      // Out of descriptors or memory: try again in a while instead of spinning on the error. The timer
      // holds `this`, so stop_on_reactor() cancels it before the acceptor is deleted.
      try {
        retry_timer = home().schedule(std::chrono::milliseconds(100), [this] {
          retry_timer = 0;
          arm();
        });
        return;
      } catch (...) {
        retry_timer = 0;  // cannot even allocate the timer: re-arm at once
      }
    }
    arm();
  }

  void hand_off(int cfd) noexcept {
    auto* ticket = new (std::nothrow) ConnectionTicket();
    if (ticket == nullptr) {
      ::close(cfd);
      return;
    }
    if (gate && !admit(cfd, *ticket)) {
      delete ticket;
      ::close(cfd);
      return;
    }
    int one = 1;
    ::setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const ReactorSlot where = reactors[next++ % reactors.size()];
    TargetQueueHandler* h = handler;
    const TcpTargetOptions o = opts;
    try {
      where.reactor->post([cfd, where, h, o, ticket] {
        std::unique_ptr<ConnectionTicket> t(ticket);
        TcpTargetConnection* c = nullptr;
        std::unique_ptr<TcpSocketIo> io;
        try {
          io = make_tcp_queue_io(*where.reactor, cfd, o.tls);
        } catch (...) {
          ::close(cfd);
          return;
        }
        try {
          c = new TcpTargetConnection(std::move(io), cfd, where, *h, o, std::move(*t));
        } catch (...) {
          return;  // the socket went with the I/O
        }
        c->start();
      });
    } catch (...) {
      delete ticket;
      ::close(cfd);
    }
  }

  bool admit(int cfd, ConnectionTicket& ticket) noexcept {
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    if (::getpeername(cfd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return false;  // already gone
    std::string why;
    if (gate->admit(gate_listener, host_of(reinterpret_cast<sockaddr*>(&peer)), ticket, why)) return true;
    if (peer_error_log_allowed()) {
      spdlog::warn("nvme-tcp {}: connection from {} refused: {}", name, peer_name_of(cfd), why);
    }
    return false;
  }

  void stop_on_reactor() noexcept override {
    stopping = true;
    if (retry_timer != 0) {
      home().cancel(retry_timer);
      retry_timer = 0;
    }
    if (!armed) {
      ::close(fd);
      delete this;
      return;
    }
    io_uring_sqe* sqe = home().sqe();
    io_uring_prep_cancel(sqe, &op.op, 0);
    io_uring_sqe_set_data64(sqe, 0);
  }
};

namespace {

Result<void> check_options(const TcpTargetOptions& opts) {
  if (opts.maxh2cdata < pt::kMinMaxH2CData || opts.maxh2cdata % 4 != 0) {
    return make_error("maxh2cdata must be >= 4096 and a multiple of 4", EINVAL);
  }
  if (opts.tls.policy != TlsPolicy::none) {
    if (!opts.tls.context || !opts.tls.context->is_server()) {
      return make_error("a TCP listener with TLS needs a server TLS context", EINVAL);
    }
    // Probed once here (it may open sockets) rather than on a reactor at the first handshake.
    if (opts.tls.allow_ktls) {
      const auto& k = security::probe_ktls();
      spdlog::debug("nvme-tcp: kernel TLS {}: {}", k.available ? "available" : "not available", k.reason);
    }
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<TcpListener>> TcpListener::create(const TransportAddress& address,
                                                        std::vector<ReactorSlot> reactors,
                                                        TargetQueueHandler& handler, const TcpTargetOptions& opts,
                                                        std::shared_ptr<ConnectionGate> gate) {
  if (auto valid = check_reactors(reactors, "TCP"); !valid) return tl::unexpected(valid.error());
  if (auto valid = check_options(opts); !valid) return tl::unexpected(valid.error());
  auto sa = resolve_address(address, true);
  if (!sa) return tl::unexpected(sa.error());
  const std::string where = (address.traddr.empty() ? "*" : address.traddr) + ":" + std::to_string(address.trsvcid);
  int fd = ::socket(sa->storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error("socket: " + std::string(std::strerror(errno)), errno);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, sa->get(), sa->len) != 0 || ::listen(fd, 1024) != 0) {
    int e = errno;
    ::close(fd);
    return make_error("cannot listen on " + where + ": " + std::strerror(e), e);
  }
  std::unique_ptr<TcpListener> l(new TcpListener());
  l->address_ = local_address_of(fd);
  if (!address.traddr.empty()) l->address_.traddr = address.traddr;
  auto* a = new Acceptor();
  a->reactors = std::move(reactors);
  a->handler = &handler;
  a->opts = opts;
  a->name = where;
  if (gate) {
    a->gate_listener = gate->add_listener(where);
    a->gate = std::move(gate);
  }
  a->fd = fd;
  a->op.op.fn = &Acceptor::on_cqe;
  a->op.self = a;
  l->home_ = a;
  return l;
}

Result<void> TcpListener::set_options(const TcpTargetOptions& opts) {
  if (auto valid = check_options(opts); !valid) return valid;
  auto* a = static_cast<Acceptor*>(home_);
  if (a == nullptr) return make_error("the listener is stopped", EINVAL);
  try {
    a->home().post([a, opts] { a->opts = opts; });
  } catch (const std::exception& e) {
    return make_error(std::string("TCP listener options: ") + e.what(), ENOMEM);
  }
  return {};
}

}  // namespace rdmablk::transport::tcp
