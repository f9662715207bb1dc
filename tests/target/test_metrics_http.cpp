// MetricsHttpServer: driven by a poll loop on a thread of the test (as the daemon's control thread drives
// it), spoken to with raw sockets. Waits are for events (a close, a connection count the server thread
// publishes), with generous safety caps, never fixed sleeps.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "target/metrics/metrics.h"
#include "target/metrics/metrics_http.h"

namespace {

using namespace rdmablk::target;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Longest any single wait of a test may take before it counts as a hang.
constexpr auto kSafety = 20s;

// The server on a thread of its own, in a poll loop with an eventfd of the test's in the same poll set
// (which the server must ignore). After every handle() the connection count is published.
class ServerThread {
 public:
  explicit ServerThread(MetricsHttpLimits limits, MetricsHttpServer::Render render,
                        const std::string& address = "127.0.0.1") {
    auto s = MetricsHttpServer::create(address, 0, limits, std::move(render));
    if (!s) {
      error = s.error().message;
      return;
    }
    server_ = std::move(*s);
    port = server_->port();
    bound = server_->bound_address();
    stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    thread_ = std::thread([this] { run(); });
  }
  ~ServerThread() {
    if (thread_.joinable()) {
      uint64_t one = 1;
      EXPECT_EQ(::write(stop_fd_, &one, sizeof(one)), 8);
      thread_.join();
    }
    if (stop_fd_ >= 0) ::close(stop_fd_);
  }

  // Waits until the server has `n` connections open; false after kSafety.
  bool wait_connections(std::size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kSafety, [&] { return connections_ == n; });
  }
  std::size_t connections() {
    std::lock_guard lock(mu_);
    return connections_;
  }

  std::string error;
  uint16_t port = 0;
  std::string bound;

 private:
  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.clear();
      fds.push_back({stop_fd_, POLLIN, 0});
      server_->add_pollfds(fds);
      const auto wait = server_->next_timeout(Clock::now());
      const int ms = wait == std::chrono::milliseconds::max() ? -1 : static_cast<int>(std::min<int64_t>(wait.count(), INT_MAX));
      const int n = ::poll(fds.data(), fds.size(), ms);
      if (n < 0 && errno != EINTR) {
        ADD_FAILURE() << "poll: " << std::strerror(errno);
        return;
      }
      if (fds[0].revents != 0) return;
      server_->handle(fds, Clock::now());
      {
        std::lock_guard lock(mu_);
        connections_ = server_->connections();
      }
      cv_.notify_all();
    }
  }

  std::unique_ptr<MetricsHttpServer> server_;
  int stop_fd_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t connections_ = 0;
};

// A blocking client socket with receive and send timeouts of kSafety (a hang fails instead of hanging).
int connect_to(uint16_t port, bool ipv6 = false) {
  const int fd = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  timeval tv{static_cast<time_t>(std::chrono::seconds(kSafety).count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  int rc;
  if (ipv6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    a.sin6_port = htons(port);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  EXPECT_EQ(rc, 0) << std::strerror(errno);
  return fd;
}

void send_all(int fd, const std::string& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0) << std::strerror(errno);
    off += static_cast<std::size_t>(n);
  }
}

// Reads until the server closes. `error` gets the errno that ended it instead (0 = a clean EOF).
std::string read_to_eof(int fd, int* error = nullptr) {
  std::string out;
  char buf[64 * 1024];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int e = n == 0 ? 0 : errno;
    if (error != nullptr) {
      *error = e;
    } else {
      EXPECT_EQ(e, 0) << "recv: " << std::strerror(e);
    }
    EXPECT_NE(e, EAGAIN) << "no close within " << kSafety.count() << " s";
    return out;
  }
}

struct Response {
  int status = 0;
  std::string head;  // status line + headers
  std::string body;
  std::string header(const std::string& name) const {
    const std::string key = "\r\n" + name + ": ";
    const std::size_t p = head.find(key);
    if (p == std::string::npos) return "<absent>";
    const std::size_t v = p + key.size();
    return head.substr(v, head.find("\r\n", v) - v);
  }
};

Response parse_response(const std::string& raw) {
  Response r;
  const std::size_t end = raw.find("\r\n\r\n");
  EXPECT_NE(end, std::string::npos) << "no response head in: " << raw;
  if (end == std::string::npos) return r;
  r.head = raw.substr(0, end + 2);
  r.body = raw.substr(end + 4);
  EXPECT_EQ(raw.compare(0, 9, "HTTP/1.1 "), 0) << raw;
  r.status = std::atoi(raw.c_str() + 9);
  EXPECT_EQ(r.header("Connection"), "close");
  EXPECT_EQ(r.header("Content-Length"), std::to_string(r.body.size())) << r.head;
  return r;
}

Response http_exchange(uint16_t port, const std::string& request, bool ipv6 = false) {
  const int fd = connect_to(port, ipv6);
  send_all(fd, request);
  const std::string raw = read_to_eof(fd);
  ::close(fd);
  return parse_response(raw);
}

const std::string kBody = "# HELP rdmablk_test A test\n# TYPE rdmablk_test gauge\nrdmablk_test 1\n";

MetricsHttpServer::Render fixed_body() {
  return [] { return kBody; };
}

TEST(MetricsHttp, GetMetricsAnswers200WithTheTextFormat) {
  ServerThread s({}, fixed_body());
  ASSERT_EQ(s.error, "");
  ASSERT_NE(s.port, 0);
  EXPECT_EQ(s.bound, "127.0.0.1:" + std::to_string(s.port));

  Response r = http_exchange(s.port, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.header("Content-Type"), kPrometheusTextContentType);
  EXPECT_EQ(r.body, kBody);

  // A query string is ignored; HTTP/1.0, bare LF line ends and leading empty lines are accepted.
  r = http_exchange(s.port, "GET /metrics?name[]=rdmablk_test&x=%20 HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kBody);
  r = http_exchange(s.port, "\r\nGET /metrics HTTP/1.0\n\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kBody);

  // HEAD: the same head, no body.
  const int fd = connect_to(s.port);
  send_all(fd, "HEAD /metrics HTTP/1.1\r\n\r\n");
  const std::string raw = read_to_eof(fd);
  ::close(fd);
  EXPECT_EQ(raw.compare(0, 15, "HTTP/1.1 200 OK"), 0) << raw;
  EXPECT_NE(raw.find("\r\nContent-Length: " + std::to_string(kBody.size()) + "\r\n"), std::string::npos) << raw;
  EXPECT_EQ(raw.substr(raw.size() - 4), "\r\n\r\n") << raw;
}

TEST(MetricsHttp, TheRequestArrivingInPiecesIsAnswered) {
  ServerThread s({}, fixed_body());
  ASSERT_EQ(s.error, "");
  const int fd = connect_to(s.port);
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  for (char ch : req) {
    send_all(fd, std::string(1, ch));
  }
  const Response r = parse_response(read_to_eof(fd));
  ::close(fd);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kBody);
}

TEST(MetricsHttp, OtherPathsMethodsAndMalformedRequests) {
  ServerThread s({}, fixed_body());
  ASSERT_EQ(s.error, "");
  for (const char* path : {"/", "/metricsx", "/metrics/", "/favicon.ico", "*"}) {
    const Response r = http_exchange(s.port, std::string("GET ") + path + " HTTP/1.1\r\n\r\n");
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.body.find("rdmablk_test"), std::string::npos);
  }
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "get"}) {
    const Response r = http_exchange(s.port, std::string(method) + " /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(r.status, 405) << method;
    EXPECT_EQ(r.header("Allow"), "GET, HEAD") << method;
  }
  // A POST with a body the server never reads: the response still arrives whole (no reset).
  const Response post = http_exchange(s.port, "POST /metrics HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" + std::string(100000, 'x'));
  EXPECT_EQ(post.status, 405);
  for (const char* bad : {"GARBAGE\r\n\r\n", "GET /metrics\r\n\r\n", "GET  /metrics HTTP/1.1\r\n\r\n",
                          "GET /metrics HTTP/1.1 extra\r\n\r\n", "GET /metrics HTTP/x.y\r\n\r\n",
                          "GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n", "GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n",
                          "G(T /metrics HTTP/1.1\r\n\r\n", "GET /met\x01rics HTTP/1.1\r\n\r\n"}) {
    EXPECT_EQ(http_exchange(s.port, bad).status, 400) << bad;
  }
  EXPECT_EQ(http_exchange(s.port, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").status, 505);
}

TEST(MetricsHttp, OversizedRequestHeadIs431) {
  MetricsHttpLimits limits;
  limits.max_request_head = 8192;
  ServerThread s(limits, fixed_body());
  ASSERT_EQ(s.error, "");
  // A whole head just over the bound, and one that never ends (the client keeps sending while the server
  // answers).
  const std::string big = "GET /metrics HTTP/1.1\r\nX-Filler: " + std::string(8200, 'a') + "\r\n\r\n";
  EXPECT_EQ(http_exchange(s.port, big).status, 431);
  EXPECT_EQ(http_exchange(s.port, "GET /metrics HTTP/1.1\r\nX-Filler: " + std::string(20000, 'a')).status, 431);
  // Just under the bound is fine.
  const std::string head = "GET /metrics HTTP/1.1\r\nX-Filler: ";
  const std::string fits = head + std::string(8192 - head.size() - 4, 'a') + "\r\n\r\n";
  ASSERT_EQ(fits.size(), 8192u);
  EXPECT_EQ(http_exchange(s.port, fits).status, 200);
}

TEST(MetricsHttp, ConnectionsOverTheLimitAreClosedAtOnceAndLoggedOnce) {
  auto ring = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  auto logger = spdlog::default_logger();
  logger->sinks().push_back(ring);  // before the server thread starts: sinks() is not thread-safe
  const auto saved_level = logger->level();
  logger->set_level(spdlog::level::info);

  {
    MetricsHttpLimits limits;
    limits.max_connections = 4;
    limits.idle_timeout = 60s;  // the four held connections must outlive the test
    ServerThread s(limits, fixed_body());
    ASSERT_EQ(s.error, "");
    std::vector<int> held;
    for (int i = 0; i < 4; ++i) held.push_back(connect_to(s.port));
    ASSERT_TRUE(s.wait_connections(4));

    // Three more: each accepted and closed without a byte, while the four stay open.
    for (int i = 0; i < 3; ++i) {
      const int fd = connect_to(s.port);
      int error = -1;
      const std::string got = read_to_eof(fd, &error);
      EXPECT_EQ(got, "");
      EXPECT_TRUE(error == 0 || error == ECONNRESET) << std::strerror(error);
      ::close(fd);
    }
    EXPECT_EQ(s.connections(), 4u);

    // A held connection is still served.
    send_all(held[0], "GET /metrics HTTP/1.1\r\n\r\n");
    EXPECT_EQ(parse_response(read_to_eof(held[0])).status, 200);
    ::close(held[0]);
    ASSERT_TRUE(s.wait_connections(3));
    // ... and its slot is free for a new one.
    EXPECT_EQ(http_exchange(s.port, "GET /metrics HTTP/1.1\r\n\r\n").status, 200);
    for (std::size_t i = 1; i < held.size(); ++i) ::close(held[i]);
  }

  logger->set_level(saved_level);
  logger->sinks().pop_back();
  std::size_t lines = 0;
  for (const auto& line : ring->last_formatted()) lines += line.find("limit") != std::string::npos;
  // One burst, one line (two only if the three took more than the 10 s log interval).
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 2u);
}

TEST(MetricsHttp, IdleAndPartialClientsAreClosedAfterTheTimeout) {
  MetricsHttpLimits limits;
  limits.idle_timeout = 300ms;
  ServerThread s(limits, fixed_body());
  ASSERT_EQ(s.error, "");

  // Sends nothing.
  auto start = Clock::now();
  int fd = connect_to(s.port);
  int error = -1;
  EXPECT_EQ(read_to_eof(fd, &error), "");
  EXPECT_EQ(error, 0) << std::strerror(error);
  EXPECT_GE(Clock::now() - start, limits.idle_timeout);
  ::close(fd);

  // Sends part of a request and stops.
  fd = connect_to(s.port);
  start = Clock::now();  // the server read the bytes after this: its timeout started no earlier
  send_all(fd, "GET /metr");
  EXPECT_EQ(read_to_eof(fd, &error), "");
  EXPECT_EQ(error, 0) << std::strerror(error);
  EXPECT_GE(Clock::now() - start, limits.idle_timeout);
  ::close(fd);
  EXPECT_TRUE(s.wait_connections(0));
}

TEST(MetricsHttp, ASlowReaderDoesNotStallOtherClients) {
  // A body far larger than the socket buffers: the first client's response cannot be written at once.
  const std::string big = [] {
    std::string b;
    while (b.size() < (16u << 20)) b += "rdmablk_filler{n=\"" + std::to_string(b.size()) + "\"} 1\n";
    return b;
  }();
  ServerThread s({}, [&] { return big; });
  ASSERT_EQ(s.error, "");

  const int slow = connect_to(s.port);
  send_all(slow, "GET /metrics HTTP/1.1\r\n\r\n");
  // Wait until the response has started (its first bytes are readable) without reading it.
  pollfd p{slow, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kSafety).count())), 1);

  // Another client gets its whole response meanwhile, twice.
  for (int i = 0; i < 2; ++i) {
    const Response r = http_exchange(s.port, "GET /metrics HTTP/1.1\r\n\r\n");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body.size(), big.size());
    EXPECT_TRUE(r.body == big);
  }
  EXPECT_TRUE(s.wait_connections(1));  // the slow one, its response pending
  int queued = 0;
  ASSERT_EQ(::ioctl(slow, FIONREAD, &queued), 0);
  EXPECT_LT(static_cast<std::size_t>(queued), big.size()) << "the response did not wait for the slow reader";

  // The slow reader finally reads: it gets all of it, the remainder having been kept.
  const Response r = parse_response(read_to_eof(slow));
  ::close(slow);
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.body == big);
}

TEST(MetricsHttp, IPv6AndDualStack) {
  {
    ServerThread s({}, fixed_body(), "::1");
    if (!s.error.empty()) GTEST_SKIP() << "no IPv6 loopback here: " << s.error;
    EXPECT_EQ(s.bound, "[::1]:" + std::to_string(s.port));
    EXPECT_EQ(http_exchange(s.port, "GET /metrics HTTP/1.1\r\n\r\n", true).status, 200);
  }
  {
    ServerThread s({}, fixed_body(), "[::1]");
    ASSERT_EQ(s.error, "");
    EXPECT_EQ(http_exchange(s.port, "GET /metrics HTTP/1.1\r\n\r\n", true).status, 200);
  }
  {
    ServerThread s({}, fixed_body(), "");  // every address, both families
    ASSERT_EQ(s.error, "");
    EXPECT_EQ(s.bound, "[::]:" + std::to_string(s.port));
    EXPECT_EQ(http_exchange(s.port, "GET /metrics HTTP/1.1\r\n\r\n", true).status, 200);
    EXPECT_EQ(http_exchange(s.port, "GET /metrics HTTP/1.1\r\n\r\n", false).status, 200);
  }
}

TEST(MetricsHttp, CreateReportsBadAddressesAndPortsInUse) {
  auto bad = MetricsHttpServer::create("metrics.example.com", 0, {}, fixed_body());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("metrics.example.com"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(MetricsHttpServer::create("127.0.0.1", 0, {}, nullptr));
  EXPECT_FALSE(MetricsHttpServer::create("127.0.0.1", 0, {.max_connections = 0}, fixed_body()));

  auto first = MetricsHttpServer::create("127.0.0.1", 0, {}, fixed_body());
  ASSERT_TRUE(first) << first.error().message;
  auto second = MetricsHttpServer::create("127.0.0.1", (*first)->port(), {}, fixed_body());
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().errno_value, EADDRINUSE);
  EXPECT_NE(second.error().message.find("cannot listen on 127.0.0.1:" + std::to_string((*first)->port())),
            std::string::npos)
      << second.error().message;
}

TEST(MetricsHttp, NextTimeoutFollowsTheConnectionsDeadlines) {
  MetricsHttpLimits limits;
  limits.idle_timeout = 5s;
  auto s = MetricsHttpServer::create("127.0.0.1", 0, limits, fixed_body());
  ASSERT_TRUE(s) << s.error().message;
  MetricsHttpServer& server = **s;
  const auto t0 = Clock::now();
  EXPECT_EQ(server.next_timeout(t0), std::chrono::milliseconds::max());
  std::vector<pollfd> fds;
  server.add_pollfds(fds);
  ASSERT_EQ(fds.size(), 1u);  // the listening socket
  EXPECT_EQ(fds[0].events, POLLIN);

  const int fd = connect_to(server.port());
  ASSERT_EQ(::poll(fds.data(), fds.size(), static_cast<int>(std::chrono::milliseconds(kSafety).count())), 1);
  server.handle(fds, t0);
  EXPECT_EQ(server.connections(), 1u);
  EXPECT_EQ(server.next_timeout(t0), 5000ms);
  EXPECT_EQ(server.next_timeout(t0 + 1500us), 4999ms);  // rounded up: poll never wakes before the deadline
  EXPECT_EQ(server.next_timeout(t0 + 6s), 0ms);
  fds.clear();
  server.add_pollfds(fds);
  ASSERT_EQ(fds.size(), 2u);
  EXPECT_EQ(fds[1].events, POLLIN);

  // Progress moves the deadline: a byte read at t0 + 4 s keeps the connection until t0 + 9 s.
  send_all(fd, "G");
  ASSERT_EQ(::poll(fds.data(), fds.size(), static_cast<int>(std::chrono::milliseconds(kSafety).count())), 1);
  fds.push_back({999, POLLIN, POLLIN});  // not the server's: ignored
  server.handle(fds, t0 + 4s);
  EXPECT_EQ(server.next_timeout(t0 + 4s), 5000ms);
  for (auto& p : fds) p.revents = 0;
  server.handle(fds, t0 + 8s);
  EXPECT_EQ(server.connections(), 1u);
  server.handle(fds, t0 + 9s);
  EXPECT_EQ(server.connections(), 0u);
  EXPECT_EQ(server.next_timeout(t0 + 9s), std::chrono::milliseconds::max());
  char c;
  EXPECT_EQ(::recv(fd, &c, 1, 0), 0);
  ::close(fd);
}

}  // namespace
