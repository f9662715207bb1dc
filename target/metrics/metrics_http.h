// The Prometheus scrape endpoint: a small HTTP/1.1 responder driven by the caller's poll(2) loop (the
// daemon's control thread). No threads of its own and it never blocks: every socket is non-blocking, a
// response the client does not take at once is kept and written as the socket becomes writable.
//
// It answers `GET /metrics` (any query string ignored; HEAD too) with 200 and the text of the render
// callback as kPrometheusTextContentType; another path 404; another method 405 (Allow: GET, HEAD); a
// malformed request 400; an HTTP major version other than 1 505; a request head (request line + headers)
// over Limits::max_request_head 431. Every response carries `Connection: close`: after it the server
// shuts its sending side and reads whatever the client still sends until the client closes, so that
// unread request bytes never turn the close into a reset that would discard the response.
//
// At most Limits::max_connections connections at a time; more are accepted and closed at once (logged at
// most once per 10 s). A connection that makes no progress (nothing read while the request is incomplete,
// nothing written while the response is pending) for Limits::idle_timeout is closed, and so is one still
// open idle_timeout after its response was sent.
//
// Use:
//   auto server = MetricsHttpServer::create("::", 9464, {}, [&] { return render_prometheus(status()); });
//   loop: fds.clear(); server->add_pollfds(fds); <own fds>; poll(fds, min(own, server->next_timeout(now)));
//         server->handle(fds, steady_clock::now());
#pragma once

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "protocol/result.h"

namespace rdmablk::target {

struct MetricsHttpLimits {
  std::size_t max_connections = 16;
  std::size_t max_request_head = 8 * 1024;  // request line + headers + the empty line, bytes
  std::chrono::milliseconds idle_timeout{10'000};
};

class MetricsHttpServer {
 public:
  using Clock = std::chrono::steady_clock;
  // The response body for GET /metrics; called on the caller's thread from handle(). An exception it
  // throws is answered with 500 and logged.
  using Render = std::function<std::string()>;

  // Binds and listens now, so a bad address or a port in use is reported here. `address`: an IPv4 or IPv6
  // literal ("127.0.0.1", "::1", "[::1]", "fe80::1%eth0"), numeric only (never a DNS lookup); "" or "*" is
  // every address (IPv6 dual stack, or IPv4 where the host has no IPv6). Port 0 picks a free port (see
  // port() / bound_address()).
  static Result<std::unique_ptr<MetricsHttpServer>> create(const std::string& address, uint16_t port,
                                                           MetricsHttpLimits limits, Render render);
  ~MetricsHttpServer();  // closes the listening socket and every connection
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Appends the sockets to poll and the events wanted (the listening socket, each connection).
  void add_pollfds(std::vector<pollfd>& fds) const;
  // Serves what poll reported: entries whose fd is not one of ours, or with no revents, are ignored, so the
  // caller may pass its whole poll set. Then closes connections past their deadline at `now`.
  void handle(std::span<const pollfd> ready, Clock::time_point now);
  // How long the caller may sleep in poll before handle() has a deadline to enforce (rounded up to whole
  // milliseconds, 0 when one is due); milliseconds::max() when there is none.
  std::chrono::milliseconds next_timeout(Clock::time_point now) const;

  // The bound address: "127.0.0.1:9464", "[::1]:9464", "[::]:9464".
  const std::string& bound_address() const noexcept { return bound_address_; }
  uint16_t port() const noexcept { return port_; }
  // Open connections (for tests and the status output).
  std::size_t connections() const noexcept { return conns_.size(); }

  struct Connection;

 private:
  MetricsHttpServer(int listen_fd, MetricsHttpLimits limits, Render render);
  void accept_ready(Clock::time_point now);
  void reject(int fd, Clock::time_point now);
  void on_readable(Connection& c, Clock::time_point now);
  void on_writable(Connection& c, Clock::time_point now);
  void respond(Connection& c, Clock::time_point now);
  void finish_response(Connection& c, Clock::time_point now);

  int listen_fd_ = -1;
  MetricsHttpLimits limits_;
  Render render_;
  std::string bound_address_;
  uint16_t port_ = 0;
  std::vector<std::unique_ptr<Connection>> conns_;
  // accept() ran out of file descriptors or memory: the listening socket stays out of the poll set until
  // accept_paused_until_.
  bool accept_paused_ = false;
  Clock::time_point accept_paused_until_{};
  bool accept_error_ever_logged_ = false;
  Clock::time_point accept_error_logged_at_{};
  // Over-limit connections closed since the last log line about them, and when that line was written.
  uint64_t rejected_unlogged_ = 0;
  Clock::time_point rejected_logged_at_{};
  bool rejected_ever_logged_ = false;
};

}  // namespace rdmablk::target
