// The control socket's server side: a Unix stream socket speaking JSON lines (one request object per line,
// one response object per line), driven by the daemon's control thread with poll(2). It never blocks:
// sockets are non-blocking, replies are queued until writable.
//
// Limits (a local client cannot wedge the daemon): a request line longer than max_request_bytes gets an
// error reply and the connection is closed; at most max_clients connections (more are closed at once); a
// connection idle for idle_timeout (nothing sent, or a reply not read) is closed.
//
// Access: the socket file is created mode 0600 (owner = the daemon's user, root under systemd), so other
// users cannot connect; the directory is created 0750 when missing.
#pragma once

#include <poll.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "protocol/result.h"

namespace rdmablk::target {

struct ControlServerLimits {
  std::size_t max_request_bytes = 64 * 1024;
  unsigned max_clients = 16;
  std::chrono::milliseconds idle_timeout{30'000};
};

class ControlServer {
 public:
  // Handles one request line (already known to be below the size limit) and returns the reply line
  // (without the newline).
  using Handler = std::function<std::string(const std::string& request)>;

  // Binds `path`. A socket file left by a daemon that is gone is replaced; one a live daemon answers on is
  // an error ("in use by another rdmablk-target").
  static Result<std::unique_ptr<ControlServer>> create(const std::string& path, Handler handler,
                                                       ControlServerLimits limits = {});
  ~ControlServer();  // closes every connection and removes the socket file
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  const std::string& path() const noexcept { return path_; }
  // Adds the fds to poll (the listening socket and every connection) to `fds`.
  void add_pollfds(std::vector<pollfd>& fds) const;
  // Serves whatever `fds` (the array poll() filled; entries of other owners are ignored) says is ready, and
  // closes idle connections.
  void handle(const std::vector<pollfd>& fds, std::chrono::steady_clock::time_point now);
  // How long poll() may sleep before an idle connection is due to be closed (-1: no connection).
  int poll_timeout_ms(std::chrono::steady_clock::time_point now) const;
  std::size_t client_count() const noexcept { return clients_.size(); }

 private:
  ControlServer() = default;
  struct Client {
    int fd = -1;
    std::string in;
    std::string out;
    std::chrono::steady_clock::time_point last_activity;
    bool closing = false;  // close once `out` is written
  };
  void accept_all(std::chrono::steady_clock::time_point now);
  bool serve(Client& c, short revents, std::chrono::steady_clock::time_point now);  // false: close it
  bool flush(Client& c);

  std::string path_;
  int listen_fd_ = -1;
  Handler handler_;
  ControlServerLimits limits_;
  std::vector<std::unique_ptr<Client>> clients_;
};

}  // namespace rdmablk::target
