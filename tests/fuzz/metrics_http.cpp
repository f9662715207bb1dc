// The Prometheus endpoint's HTTP/1.1 request handling (target/metrics_http.*): the real server, listening
// on 127.0.0.1 (a free port), driven by its poll loop exactly as the daemon's control thread drives it;
// each input is one client connection that sends the input as its request.
//
// Input: [0] how many times the rest is sent back to back (1..4: requests over the 8 KiB head limit), then
// the request bytes.
// After sending, the client reads until the server has answered and shut its side, or (no answer after the
// server has read everything) gives up; it always leaves with a reset, so no TIME_WAIT piles up.
// Invariants: an answer is one HTTP/1.1 response with a known status (200 400 404 405 431 505), a
// Content-Length that matches its body (none for HEAD), Connection: close; 200 only for GET or HEAD of
// /metrics, with the rendered text as the body of a GET; a complete request head within the limit always
// gets an answer and one over it gets 431; the server holds no connection after the client has gone.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "target/metrics/metrics_http.h"

namespace {

namespace tg = rdmablk::target;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kHeadLimit = 8 * 1024;
const std::string kBody = "# HELP rdmablk_up 1 when the target runs\n# TYPE rdmablk_up gauge\nrdmablk_up 1\n";

tg::MetricsHttpServer& server() {
  static std::unique_ptr<tg::MetricsHttpServer> s = [] {
    tg::MetricsHttpLimits lim;
    lim.max_request_head = kHeadLimit;
    lim.idle_timeout = std::chrono::seconds(30);
    auto made = tg::MetricsHttpServer::create("127.0.0.1", 0, lim, [] { return kBody; });
    FUZZ_CHECK(made.has_value());
    return std::move(*made);
  }();
  return *s;
}

// One round of the daemon's loop: poll the server's sockets (briefly), let it handle what is ready.
void serve_round(int timeout_ms) {
  std::vector<pollfd> fds;
  server().add_pollfds(fds);
  ::poll(fds.data(), fds.size(), timeout_ms);
  server().handle(fds, Clock::now());
}

// Where the request head ends, as RFC 9112 reads it (leading empty lines skipped, bare LF accepted).
std::size_t head_end(std::string_view in) {
  const std::size_t start = in.find_first_not_of("\r\n");
  if (start == std::string_view::npos) return std::string_view::npos;
  const std::size_t a = in.find("\n\n", start), b = in.find("\n\r\n", start);
  if (a == std::string_view::npos && b == std::string_view::npos) return std::string_view::npos;
  if (b == std::string_view::npos || (a != std::string_view::npos && a < b)) return a + 2;
  return b + 3;
}

void check_response(std::string_view req, std::string_view resp) {
  FUZZ_CHECK(resp.size() > 12 && resp.rfind("HTTP/1.1 ", 0) == 0);
  const int status = std::stoi(std::string(resp.substr(9, 3)));
  FUZZ_CHECK(status == 200 || status == 400 || status == 404 || status == 405 || status == 431 || status == 505);
  const std::size_t end = resp.find("\r\n\r\n");
  FUZZ_CHECK(end != std::string_view::npos);
  const std::string_view head = resp.substr(0, end + 4), body = resp.substr(end + 4);
  FUZZ_CHECK(head.find("\r\nConnection: close\r\n") != std::string_view::npos);
  const std::size_t cl = head.find("\r\nContent-Length: ");
  FUZZ_CHECK(cl != std::string_view::npos);
  const std::size_t length = std::stoul(std::string(head.substr(cl + 18, head.find("\r\n", cl + 18) - cl - 18)));
  const std::size_t line_start = req.find_first_not_of("\r\n");
  const std::string_view line = line_start == std::string_view::npos ? std::string_view{} : req.substr(line_start);
  const bool is_head = line.rfind("HEAD ", 0) == 0;
  if (status == 200) {
    FUZZ_CHECK(line.rfind("GET /metrics", 0) == 0 || line.rfind("HEAD /metrics", 0) == 0);
    FUZZ_CHECK(length == kBody.size());
  }
  if (status == 405) FUZZ_CHECK(head.find("\r\nAllow: GET, HEAD\r\n") != std::string_view::npos);
  if (is_head && (status == 200 || status == 404 || status == 405)) {
    FUZZ_CHECK(body.empty());
  } else {
    FUZZ_CHECK(body.size() == length);
    if (status == 200) FUZZ_CHECK(body == kBody);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::string req;
  for (unsigned i = 0, n = 1 + data[0] % 4; i < n; ++i) req.append(reinterpret_cast<const char*>(data + 1), size - 1);

  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  FUZZ_CHECK(fd >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(server().port());
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  FUZZ_CHECK(::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0);
  // Loopback takes a request this small at once (the socket buffer is far larger).
  if (!req.empty()) FUZZ_CHECK(::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()));

  std::string resp;
  bool eof = false;
  unsigned idle = 0;
  for (unsigned round = 0; round < 200 && !eof && idle < 3; ++round) {
    const std::size_t before = resp.size();
    serve_round(round < 2 ? 100 : 0);
    char buf[16 * 1024];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        resp.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) eof = true;
      break;
    }
    idle = resp.size() == before && round >= 2 ? idle + 1 : 0;
  }
  const std::size_t end = head_end(req);
  if (end != std::string::npos && end <= kHeadLimit) FUZZ_CHECK(!resp.empty());  // a whole request is answered
  if ((end == std::string::npos || end > kHeadLimit) && req.size() >= kHeadLimit) {
    FUZZ_CHECK(resp.rfind("HTTP/1.1 431 ", 0) == 0);  // the head did not end within the limit
  }
  if (!resp.empty()) {
    FUZZ_CHECK(eof);  // the server shuts its side after the response
    check_response(req, resp);
  }

  // Leave with a reset: neither side keeps a TIME_WAIT entry.
  linger lg{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  ::close(fd);
  for (unsigned round = 0; round < 100 && server().connections() != 0; ++round) serve_round(100);
  FUZZ_CHECK(server().connections() == 0);
  return 0;
}
