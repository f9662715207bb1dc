#include "target/metrics/metrics_http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <string_view>

#include "target/metrics/metrics.h"

namespace rdmablk::target {

namespace {

using namespace std::chrono_literals;

// Connections accepted per handle() call at most, so that a flood cannot keep the control thread in accept.
constexpr int kAcceptBatch = 64;
// Bytes read and thrown away per handle() call from a connection whose response is out.
constexpr std::size_t kDrainBatch = 256 * 1024;
// How long accept stays off after it ran out of file descriptors or memory.
constexpr auto kAcceptPause = 100ms;
// At most one log line per this interval about over-limit connections and about accept failures.
constexpr auto kLogInterval = 10s;

std::string sockaddr_text(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}

// RFC 9110 token characters (methods, header names).
bool is_tchar(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

// Where the request head ends (the index one past its empty line) in `in`, or npos while incomplete.
// Empty lines before the request line are skipped (RFC 9112 2.2) and a bare LF ends a line as CRLF does.
std::size_t head_end(std::string_view in) {
  const std::size_t start = in.find_first_not_of("\r\n");
  if (start == std::string_view::npos) return std::string_view::npos;
  const std::size_t lf_lf = in.find("\n\n", start);
  const std::size_t lf_crlf = in.find("\n\r\n", start);
  if (lf_lf == std::string_view::npos && lf_crlf == std::string_view::npos) return std::string_view::npos;
  if (lf_crlf == std::string_view::npos || (lf_lf != std::string_view::npos && lf_lf < lf_crlf)) return lf_lf + 2;
  return lf_crlf + 3;
}

struct Request {
  int status = 400;  // what to answer
  bool head = false;  // HEAD: no body
};

// Parses the request head (without trailing bytes) and decides the answer.
Request route(std::string_view head) {
  Request r;
  head.remove_prefix(std::min(head.size(), head.find_first_not_of("\r\n")));
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    const std::size_t lf = head.find('\n');
    std::string_view line = head.substr(0, lf);
    head.remove_prefix(lf == std::string_view::npos ? head.size() : lf + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;
    lines.push_back(line);
  }
  if (lines.empty()) return r;
  for (std::string_view line : lines) {
    for (char ch : line) {
      const auto c = static_cast<unsigned char>(ch);
      if ((c < 0x20 && c != '\t') || c == 0x7F) return r;  // CR alone, NUL, other controls
    }
  }
  // request-line = method SP request-target SP HTTP-version, single spaces.
  const std::string_view line = lines[0];
  const std::size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return r;
  const std::size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) return r;
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method) || target.empty() || target.find('\t') != std::string_view::npos) return r;
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return r;
  }
  // field-line = field-name ":" OWS field-value OWS; obsolete line folding is refused (RFC 9112 5.2).
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::size_t colon = lines[i].find(':');
    if (colon == std::string_view::npos || !is_token(lines[i].substr(0, colon))) return r;
  }
  if (version[5] != '1') {
    r.status = 505;
    return r;
  }
  const std::string_view path = target.substr(0, target.find('?'));
  if (path != "/metrics") {
    r.status = 404;
  } else if (method == "GET" || method == "HEAD") {
    r.status = 200;
  } else {
    r.status = 405;
  }
  r.head = method == "HEAD";
  return r;
}

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 505: return "HTTP Version Not Supported";
  }
  return "Error";
}

std::string response(int status, bool head, const char* content_type, std::string_view body) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
  out += "Content-Type: ";
  out += content_type;
  out += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  if (status == 405) out += "Allow: GET, HEAD\r\n";
  out += "Connection: close\r\n\r\n";
  if (!head) out.append(body);
  return out;
}

std::string error_response(int status, bool head) {
  return response(status, head, "text/plain; charset=utf-8",
                  std::to_string(status) + " " + reason(status) + (status == 404 ? ": try /metrics\n" : "\n"));
}

}  // namespace

struct MetricsHttpServer::Connection {
  enum class State : uint8_t {
    reading,   // the request head
    writing,   // the response, from out[sent]
    draining,  // response out and our side shut: reading until the client closes
  };
  int fd = -1;  // -1 once closed (the entry is dropped at the end of handle())
  State state = State::reading;
  std::string in;
  std::string out;
  std::size_t sent = 0;
  Clock::time_point deadline;
  std::string peer;

  void close() noexcept {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

MetricsHttpServer::MetricsHttpServer(int listen_fd, MetricsHttpLimits limits, Render render)
    : listen_fd_(listen_fd), limits_(limits), render_(std::move(render)) {}

MetricsHttpServer::~MetricsHttpServer() {
  for (auto& c : conns_) c->close();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

Result<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::create(const std::string& address, uint16_t port,
                                                                     MetricsHttpLimits limits, Render render) {
  if (!render) return make_error("metrics http: no render function", EINVAL);
  if (limits.max_connections == 0) return make_error("metrics http: max_connections must be at least 1", EINVAL);
  if (limits.max_request_head < 64) return make_error("metrics http: max_request_head must be at least 64", EINVAL);
  if (limits.idle_timeout <= 0ms) return make_error("metrics http: idle_timeout must be positive", EINVAL);

  std::string host = address;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string where = (host.find(':') != std::string::npos ? "[" + host + "]" : host.empty() ? "*" : host) +
                            ":" + std::to_string(port);

  sockaddr_storage ss{};
  socklen_t len = 0;
  bool any = host.empty() || host == "*";
  int fd = -1;
  if (any) {
    // Every address: IPv6 with IPv4-mapped addresses (dual stack), or IPv4 alone without IPv6.
    fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      int off = 0;
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
      in6->sin6_family = AF_INET6;
      in6->sin6_addr = in6addr_any;
      in6->sin6_port = htons(port);
      len = sizeof(sockaddr_in6);
    } else if (errno == EAFNOSUPPORT) {
      auto* in = reinterpret_cast<sockaddr_in*>(&ss);
      in->sin_family = AF_INET;
      in->sin_addr.s_addr = htonl(INADDR_ANY);
      in->sin_port = htons(port);
      len = sizeof(sockaddr_in);
    } else {
      return make_error("metrics http: socket: " + std::string(std::strerror(errno)), errno);
    }
  } else {
    addrinfo hints{};
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port);
    const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    if (rc != 0 || res == nullptr) {
      return make_error("metrics http: '" + address + "' is not an IPv4 or IPv6 address" +
                            (rc != 0 ? std::string(" (") + ::gai_strerror(rc) + ")" : std::string()),
                        EINVAL);
    }
    std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
    len = res->ai_addrlen;
    ::freeaddrinfo(res);
  }
  if (fd < 0) {
    fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return make_error("metrics http: socket: " + std::string(std::strerror(errno)), errno);
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&ss), len) != 0 || ::listen(fd, 128) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error("metrics http: cannot listen on " + where + ": " + std::strerror(e), e);
  }
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer(fd, limits, std::move(render)));
  sockaddr_storage bound{};
  socklen_t blen = sizeof(bound);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen) == 0) {
    s->bound_address_ = sockaddr_text(reinterpret_cast<const sockaddr*>(&bound));
    s->port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                                           : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  } else {
    s->bound_address_ = where;
    s->port_ = port;
  }
  return s;
}

void MetricsHttpServer::add_pollfds(std::vector<pollfd>& fds) const {
  if (!accept_paused_) fds.push_back({listen_fd_, POLLIN, 0});
  for (const auto& c : conns_) {
    if (c->fd < 0) continue;
    fds.push_back({c->fd, static_cast<short>(c->state == Connection::State::writing ? POLLOUT : POLLIN), 0});
  }
}

std::chrono::milliseconds MetricsHttpServer::next_timeout(Clock::time_point now) const {
  bool have = false;
  Clock::time_point earliest{};
  auto consider = [&](Clock::time_point t) {
    if (!have || t < earliest) earliest = t;
    have = true;
  };
  for (const auto& c : conns_) consider(c->deadline);
  if (accept_paused_) consider(accept_paused_until_);
  if (!have) return std::chrono::milliseconds::max();
  if (earliest <= now) return 0ms;
  return std::chrono::ceil<std::chrono::milliseconds>(earliest - now);
}

void MetricsHttpServer::handle(std::span<const pollfd> ready, Clock::time_point now) {
  bool listen_ready = false;
  for (const pollfd& p : ready) {
    if (p.revents == 0 || p.fd < 0) continue;
    if (p.fd == listen_fd_) {
      listen_ready = true;
      continue;
    }
    auto it = std::find_if(conns_.begin(), conns_.end(), [&](const auto& c) { return c->fd == p.fd; });
    if (it == conns_.end()) continue;
    Connection& c = **it;
    // Errors and hang-ups surface as the result of the read or write itself.
    if (c.state == Connection::State::writing) {
      on_writable(c, now);
    } else {
      on_readable(c, now);
    }
  }
  // Closed ones and those past their deadline go; new ones come last, so no file descriptor number of this
  // poll round can name a connection accepted after it.
  std::erase_if(conns_, [&](const std::unique_ptr<Connection>& c) {
    if (c->fd >= 0 && now >= c->deadline) {
      spdlog::debug("metrics http: closing {} after {} ms without progress", c->peer, limits_.idle_timeout.count());
      c->close();
    }
    return c->fd < 0;
  });
  if (accept_paused_ && now >= accept_paused_until_) {
    accept_paused_ = false;
    listen_ready = true;  // connections may have queued meanwhile
  }
  if (listen_ready) accept_ready(now);
}

void MetricsHttpServer::accept_ready(Clock::time_point now) {
  for (int i = 0; i < kAcceptBatch; ++i) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      if (e == EAGAIN || e == EWOULDBLOCK) return;
      if (e == EINTR || e == ECONNABORTED || e == EPROTO || e == EPERM) continue;
      if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        accept_paused_ = true;
        accept_paused_until_ = now + kAcceptPause;
      }
      if (!accept_error_ever_logged_ || now - accept_error_logged_at_ >= kLogInterval) {
        spdlog::warn("metrics http: accept on {} failed: {}", bound_address_, std::strerror(e));
        accept_error_ever_logged_ = true;
        accept_error_logged_at_ = now;
      }
      return;
    }
    if (conns_.size() >= limits_.max_connections) {
      reject(fd, now);
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->deadline = now + limits_.idle_timeout;
    c->peer = sockaddr_text(reinterpret_cast<const sockaddr*>(&ss));
    conns_.push_back(std::move(c));
  }
}

void MetricsHttpServer::reject(int fd, Clock::time_point now) {
  ::close(fd);
  ++rejected_unlogged_;
  if (!rejected_ever_logged_ || now - rejected_logged_at_ >= kLogInterval) {
    spdlog::warn("metrics http: connection limit ({}) reached: closed {} new connection(s) at once "
                 "(logged at most every {} s)",
                 limits_.max_connections, rejected_unlogged_,
                 std::chrono::duration_cast<std::chrono::seconds>(kLogInterval).count());
    rejected_unlogged_ = 0;
    rejected_ever_logged_ = true;
    rejected_logged_at_ = now;
  }
}

void MetricsHttpServer::on_readable(Connection& c, Clock::time_point now) {
  if (c.state == Connection::State::draining) {
    // Throw away what the client still sends until it closes; the deadline is not extended.
    char buf[16 * 1024];
    for (std::size_t drained = 0; drained < kDrainBatch;) {
      const ssize_t n = ::recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        drained += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.close();  // EOF or error: done
      return;
    }
    return;
  }
  for (;;) {
    const std::size_t have = c.in.size();
    const std::size_t room = limits_.max_request_head - have;
    if (room == 0) break;
    c.in.resize(have + std::min<std::size_t>(room, 4096));
    const ssize_t n = ::recv(c.fd, c.in.data() + have, c.in.size() - have, MSG_DONTWAIT);
    if (n <= 0) {
      c.in.resize(have);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      // EOF before a whole request, or an error: nothing to answer.
      c.close();
      return;
    }
    c.in.resize(have + static_cast<std::size_t>(n));
    c.deadline = now + limits_.idle_timeout;
    if (head_end(c.in) != std::string::npos) {
      respond(c, now);
      return;
    }
  }
  // The head filled its bound without ending.
  spdlog::debug("metrics http: request head from {} over {} bytes", c.peer, limits_.max_request_head);
  c.out = error_response(431, false);
  c.in.clear();
  c.state = Connection::State::writing;
  on_writable(c, now);
}

void MetricsHttpServer::respond(Connection& c, Clock::time_point now) {
  const std::string_view in(c.in);
  const Request r = route(in.substr(0, head_end(in)));
  if (r.status == 200) {
    try {
      c.out = response(200, r.head, kPrometheusTextContentType, render_());
    } catch (const std::exception& e) {
      spdlog::error("metrics http: rendering the metrics failed: {}", e.what());
      c.out = error_response(500, r.head);
    }
  } else {
    spdlog::debug("metrics http: {} answered {} for '{}'", c.peer, r.status,
                  in.substr(0, std::min(in.find_first_of("\r\n", in.find_first_not_of("\r\n")), std::size_t{200})));
    c.out = error_response(r.status, r.head);
  }
  std::string().swap(c.in);
  c.sent = 0;
  c.state = Connection::State::writing;
  c.deadline = now + limits_.idle_timeout;
  on_writable(c, now);  // most responses fit the socket buffer: no poll round needed
}

void MetricsHttpServer::on_writable(Connection& c, Clock::time_point now) {
  while (c.sent < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      c.sent += static_cast<std::size_t>(n);
      c.deadline = now + limits_.idle_timeout;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.close();  // the client went away
    return;
  }
  finish_response(c, now);
}

void MetricsHttpServer::finish_response(Connection& c, Clock::time_point now) {
  std::string().swap(c.out);
  c.sent = 0;
  ::shutdown(c.fd, SHUT_WR);
  c.state = Connection::State::draining;
  c.deadline = now + limits_.idle_timeout;
}

}  // namespace rdmablk::target
