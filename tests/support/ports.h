// TCP ports for tests: the one free-port helper (for configs, which refuse port 0), a listening socket
// that holds a port (for "port in use" tests) and a raw connection to a port on 127.0.0.1.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace rdmablk::testing {

// A TCP port that was free a moment ago on `address` (a bind() to it succeeded and was released); 0 when
// none was found. Below the kernel's ephemeral range (ip_local_port_range, 32768-60999 by default): a port
// taken from it can be reused as the local port of any outgoing connection on the machine while a target
// is down between a stop and a restart, and the restart then finds it "already in use". Another process may
// still take the port before the caller binds it: a caller that starts a daemon on it retries on "in use"
// (e2e::TargetProcess does).
inline uint16_t pick_free_port(const char* address = "127.0.0.1") {
  static std::atomic<uint32_t> seed{static_cast<uint32_t>(::getpid()) * 2654435761u};
  for (int attempt = 0; attempt < 200; ++attempt) {
    const uint32_t r = seed.fetch_add(40503u) * 2654435761u;
    const uint16_t candidate = static_cast<uint16_t>(20000 + (r >> 8) % 12000);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(candidate);
    ::inet_pton(AF_INET, address, &a.sin_addr);
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    if (free) return candidate;
  }
  return 0;
}

// A socket listening on 127.0.0.1 on a port the kernel chose, stored in *port; -1 on failure. The caller
// closes it.
inline int listen_on_loopback(uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0 || ::listen(fd, 1) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  *port = ntohs(sa.sin_port);
  return fd;
}

// A blocking TCP connection to 127.0.0.1:port with TCP_NODELAY (for hand-made PDUs); -1 on failure.
inline int raw_connect(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace rdmablk::testing
