#include "target/control/control_server.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "transport/log_limit.h"

namespace rdmablk::target {

namespace {

Result<sockaddr_un> unix_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    return make_error("control socket path \"" + path + "\" is empty or longer than " +
                      std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// True when a process accepts connections on the socket file at `addr`.
bool someone_listens(const sockaddr_un& addr) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool live = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return live;
}

}  // namespace

Result<std::unique_ptr<ControlServer>> ControlServer::create(const std::string& path, Handler handler,
                                                             ControlServerLimits limits) {
  auto addr = unix_address(path);
  if (!addr) return tl::unexpected(addr.error());
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) {
      std::filesystem::create_directories(dir, ec);
      if (ec) return make_error("control socket directory " + dir.string() + ": " + ec.message());
      ::chmod(dir.c_str(), 0750);
    }
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return make_error("control socket " + path + ": exists and is not a socket");
    if (someone_listens(*addr)) return make_error("control socket " + path + " is in use by another rdmablk-target");
    ::unlink(path.c_str());  // left by a daemon that is gone
  }
  std::unique_ptr<ControlServer> s(new ControlServer());
  s->path_ = path;
  s->handler_ = std::move(handler);
  s->limits_ = limits;
  s->listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0) return make_error(std::string("control socket: socket: ") + std::strerror(errno), errno);
  // The file is created with the umask applied: make it 0600 from the start, then be sure.
  const mode_t old_mask = ::umask(0177);
  const int rc = ::bind(s->listen_fd_, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr));
  const int bind_errno = errno;
  ::umask(old_mask);
  if (rc != 0) {
    const int e = bind_errno;
    ::close(s->listen_fd_);
    s->listen_fd_ = -1;
    return make_error("control socket " + path + ": bind: " + std::strerror(e), e);
  }
  ::chmod(path.c_str(), 0600);
  if (::listen(s->listen_fd_, 16) != 0) {
    const int e = errno;
    return make_error("control socket " + path + ": listen: " + std::strerror(e), e);
  }
  return s;
}

ControlServer::~ControlServer() {
  for (auto& c : clients_) ::close(c->fd);
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(path_.c_str());
  }
}

void ControlServer::add_pollfds(std::vector<pollfd>& fds) const {
  fds.push_back({listen_fd_, POLLIN, 0});
  for (const auto& c : clients_) fds.push_back({c->fd, static_cast<short>(c->out.empty() ? POLLIN : POLLIN | POLLOUT), 0});
}

void ControlServer::accept_all(std::chrono::steady_clock::time_point now) {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or an error that the next poll retries
    if (clients_.size() >= limits_.max_clients) {
      if (transport::peer_error_log_allowed())
        spdlog::warn("control socket: {} clients connected already, refusing another", clients_.size());
      static constexpr char kBusy[] = "{\"ok\":false,\"error\":\"too many control connections\"}\n";
      (void)!::send(fd, kBusy, sizeof(kBusy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Client>();
    c->fd = fd;
    c->last_activity = now;
    clients_.push_back(std::move(c));
  }
}

bool ControlServer::flush(Client& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.out.erase(0, static_cast<std::size_t>(n));
  }
  return !c.closing;
}

bool ControlServer::serve(Client& c, short revents, std::chrono::steady_clock::time_point now) {
  if ((revents & POLLOUT) != 0) {
    c.last_activity = now;
    if (!flush(c)) return false;
  }
  if ((revents & (POLLIN | POLLHUP | POLLERR)) == 0) return true;
  char buf[8192];
  for (;;) {
    ssize_t n = ::recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) {  // the peer closed: answer what it asked if the socket takes it, then close
      flush(c);
      return false;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      return false;
    }
    c.last_activity = now;
    if (c.closing) continue;  // discard what follows an oversized request
    c.in.append(buf, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (;;) {
      const std::size_t nl = c.in.find('\n', start);
      if (nl == std::string::npos) break;
      std::string line = c.in.substr(start, nl - start);
      start = nl + 1;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      c.out += handler_(line);
      c.out += '\n';
    }
    c.in.erase(0, start);
    if (c.in.size() > limits_.max_request_bytes) {
      c.out += "{\"ok\":false,\"error\":\"request longer than " + std::to_string(limits_.max_request_bytes) +
               " bytes\"}\n";
      c.in.clear();
      c.closing = true;
    }
  }
  return flush(c);
}

void ControlServer::handle(const std::vector<pollfd>& fds, std::chrono::steady_clock::time_point now) {
  bool listen_ready = false;
  for (const pollfd& p : fds) {
    if (p.revents == 0) continue;
    if (p.fd == listen_fd_) {
      listen_ready = true;
      continue;
    }
    auto it = std::find_if(clients_.begin(), clients_.end(), [&](const auto& c) { return c->fd == p.fd; });
    if (it == clients_.end()) continue;
    if (!serve(**it, p.revents, now)) {
      ::close((*it)->fd);
      clients_.erase(it);
    }
  }
  std::erase_if(clients_, [&](const std::unique_ptr<Client>& c) {
    if (now - c->last_activity < limits_.idle_timeout && !(c->closing && c->out.empty())) return false;
    ::close(c->fd);
    return true;
  });
  if (listen_ready) accept_all(now);
}

int ControlServer::poll_timeout_ms(std::chrono::steady_clock::time_point now) const {
  if (clients_.empty()) return -1;
  auto next = std::chrono::steady_clock::time_point::max();
  for (const auto& c : clients_) next = std::min(next, c->last_activity + limits_.idle_timeout);
  if (next <= now) return 0;
  return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count()) + 1;
}

}  // namespace rdmablk::target
